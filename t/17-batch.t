#!/usr/bin/perl
# Requests that share a script call.  A worker sends the requests it reads in
# one loop turn in one EVALSHA, each zone's arguments once; a zone enforced
# in one location and dry-run in another is two zones to the call.
# Expected (spec): every request decided as if alone, exact counts in Redis
# whatever the mix of zones, dry runs, peeks and subjects in one call.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use FaultTest qw(rhdr sr);
use POSIX ();
use Time::HiRes qw(sleep);

RateLimitTest::require_module();

my $t = FaultTest->new(workers => 1);
$t->write_conf(<<'EOF');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=2s;
ratelimit_zone a key=$http_x_api_key limit=2 window=60s bucket=1s;
ratelimit_zone b key=$http_x_api_key limit=4 window=60s bucket=1s;
ratelimit_zone f key=$http_x_api_key limit=1 window=60s algorithm=fixed;
server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    ratelimit_peek_header X-Peek;
    location /ab/   { ratelimit zone=a; ratelimit zone=b; alias %%TMP%%/html/; }
    location /bdry/ { ratelimit zone=b dry_run; alias %%TMP%%/html/; }
    location /f/    { ratelimit zone=f; alias %%TMP%%/html/; }
}
EOF
$t->start_redis;
$t->start_nginx;

sub total {
    my ($zone, $subject) = @_;
    return $t->redis_window_count("rl:$zone:$subject") // 0;
}

# Rounds of 24 requests sent at once over 2 subjects and all 3 locations,
# /ab/ and /bdry/ interleaved so that a call mixes zone b enforced and
# dry-run past b's limit, peeks among them, until one round shared script
# calls (whether a burst arrives in one loop turn is up to the kernel);
# every round is checked.
my ($shared, @wrong, %seen);
for my $round (1 .. 5) {
    my @plan = map {
        my $s = "s$round-" . ($_ % 2);
        my $loc = (qw(ab bdry ab bdry f))[ int($_ / 2) % 5 ];
        my %h = ('X-Api-Key' => $s);
        $h{'X-Peek'} = 1 if $_ % 8 == 7;
        [$s, $loc, \%h];
    } 0 .. 23;
    my $calls = $t->commandstat('evalsha');
    my @r = $t->burst(scalar @plan, sub { ("/$plan[$_[0]][1]/index.html", $plan[$_[0]][2]) }, 10);
    my $used = $t->commandstat('evalsha') - $calls;

    my %n;    # per subject: outcomes by location
    for my $i (0 .. $#plan) {
        my ($s, $loc, $h) = @{ $plan[$i] };
        my $st = rhdr($r[$i], 'X-RL-Status') // '-';
        my $want_status = $h->{'X-Peek'} ? 200 : $st eq 'REJECTED' ? 429 : 200;
        push @wrong, "round $round request $i ($loc $s): " . sr($r[$i])
            if $r[$i]{status} != $want_status || (!$h->{'X-Peek'} && ($st eq 'ERROR' || $st eq '-'));
        $n{$s}{"$loc/$st"}++ unless $h->{'X-Peek'};
    }
    for my $s (sort keys %n) {
        my %c = %{ $n{$s} };
        my $ab_passed = $c{'ab/PASSED'} // 0;
        my $dry_counted = $c{'bdry/PASSED'} // 0;
        my ($a, $b, $f) = (total('a', $s), total('b', $s), total('f', $s));
        push @wrong, "round $round $s: a=$a but $ab_passed passed /ab/" if $a != $ab_passed;
        push @wrong, "round $round $s: b=$b but $ab_passed + $dry_counted counted" if $b != $ab_passed + $dry_counted;
        push @wrong, "round $round $s: a=$a over 2 or b=$b over 4" if $a > 2 || $b > 4;
        push @wrong, "round $round $s: /ab/ rejected with a=$a and b=$b below their limits"
            if $a < 2 && $b < 4 && ($c{'ab/REJECTED'} // 0) > 0;
        push @wrong, "round $round $s: /bdry/ counted $dry_counted of $c{'bdry/REJECTED_DRY_RUN'} dry-run rejections with b=$b below its limit"
            if $b < 4 && ($c{'bdry/REJECTED_DRY_RUN'} // 0) > 0;
        push @wrong, "round $round $s: f=$f, /f/ passed " . ($c{'f/PASSED'} // 0)
            if $f != ($c{'f/PASSED'} // 0) || $f > 1;
        push @wrong, "round $round $s: /f/ rejected with f=$f"
            if $f < 1 && ($c{'f/REJECTED'} // 0) > 0;
        $seen{$_} += $c{$_} for keys %c;
    }
    if ($used < @plan) {
        $shared = "round $round: 24 requests in $used calls";
        last;
    }
}
is(join("\n", @wrong), '', 'every request decided as if alone, exact counts in Redis');
ok($seen{'ab/REJECTED'} && $seen{'bdry/REJECTED_DRY_RUN'} && $seen{'f/REJECTED'} && $seen{'ab/PASSED'},
   'the rounds hit every limit: ' . join(', ', map { "$_=$seen{$_}" } sort keys %seen));
ok($shared, 'requests shared script calls (' . ($shared // 'never') . ')');

# A subject over its limit and fresh subjects in the same call: the deny
# memory and Redis agree, and the fresh ones pass.
{
    $t->req('f', 'full');
    my @r = $t->burst(10, sub { ('/f/index.html', { 'X-Api-Key' => $_[0] % 2 ? "fresh$_[0]" : 'full' }) }, 10);
    is(join(' ', map { $_->{status} } @r), join(' ', map { $_ % 2 ? 200 : 429 } 0 .. 9),
       'a full subject and fresh ones at once: 429 for the full one only');
    is(total('f', 'full'), 1, 'the full subject stays at its limit');
}

# While a call is in flight, the next batch fills over the loop turns that
# follow instead of going out behind it: with Redis stopped, a request's
# call waits, and 8 more sent 40 ms apart (8 loop turns) make one call when
# Redis answers the first.
{
    # the script's or the Redis module's
    my $decisions = sub { $t->commandstat('evalsha') + $t->commandstat('ratelimit.decide') };
    my $calls = $decisions->();
    kill 'STOP', $t->redis_pid;
    my $cont = fork // die "fork: $!";
    if (!$cont) { sleep 0.7; kill 'CONT', $t->redis_pid; POSIX::_exit(0) }
    my @r = $t->burst(9, sub { ('/ab/index.html', { 'X-Api-Key' => "held$_[0]" }) }, 5, 0.04);
    waitpid $cont, 0;
    kill 'CONT', $t->redis_pid;
    is(join(' ', map { sr($_) } @r), join(' ', ('200/PASSED') x 9), 'the held requests all passed');
    is($decisions->() - $calls, 2, 'one call for the first request, one for the 8 held behind it');
    is(join(' ', map { total('a', "held$_") } 0 .. 8), join(' ', (1) x 9), 'each counted once');
}

$t->final_checks;
done_testing;
