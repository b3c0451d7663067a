#!/usr/bin/perl
# Many requests in flight at once: ~2000 concurrent connections, each with its
# own subject, over two zones with different limits.
#
# Expected (spec): every request is answered and every verdict belongs to its
# own subject: phase 1, each subject sends one request and sees
# X-RateLimit-Remaining = its zone's limit - 1; phase 2, each subject sends its
# own number of requests (some over the limit) all mixed together, and per
# subject the admitted requests saw remaining limit-2, limit-3, ... exactly
# once each, the others were rejected, and Redis holds exactly that count.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use IO::Socket::INET;
use IO::Select;
use POSIX ();
use Time::HiRes qw(time sleep);
use FaultTest qw(parse_response);

RateLimitTest::require_module();

my $WORKERS = 2;
my $CLIENTS = 4;      # forked client processes
my $PER     = 500;    # subjects (= concurrent connections in phase 1) per client
my $WINDOW  = 300;    # phase 2: requests in flight per client
my %LIMIT   = (a => 5, b => 3);

my $t = FaultTest->new(workers => $WORKERS);

# ---------------------------------------------------------------------------
# helpers (local to this file)

sub zone_of { $_[0] % 2 ? 'b' : 'a' }                 # subject index -> zone/location
sub extra_of {                                        # phase 2 requests of subject j
    my ($j) = @_;
    return zone_of($j) eq 'a' ? 1 + ($j * 7) % 6 : 1 + ($j * 5) % 4;
}

# In a forked client: runs the requests [subject, zone] with at most $window
# in flight; with $barrier, connects all first, then waits for the go file.
# Returns result lines "subject zone status rs remaining limit policy retry".
sub run_requests {
    my ($reqs, $window, $barrier, $c) = @_;
    my $port = $t->port('PORT');
    my @queue = @$reqs;
    my (%fl, @out);
    my $sel = IO::Select->new;
    my $deadline = time + 40;
    my $open = sub {
        my $r = shift @queue;
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp', Timeout => 10);
        if (!$s) { push @out, "$r->[0]\t$r->[1]\tERR-connect:$!"; return }
        binmode $s;
        $s->blocking(0);
        $fl{ fileno $s } = { r => $r, s => $s, buf => '' };
        $sel->add($s);
        return $s;
    };
    my $send = sub {
        my ($e) = @_;
        my $req = "GET /$e->{r}[1]/index.html HTTP/1.0\r\nHost: localhost\r\nX-Api-Key: $e->{r}[0]\r\n\r\n";
        my $n = syswrite($e->{s}, $req);
        if (!defined $n || $n != length $req) {
            push @out, "$e->{r}[0]\t$e->{r}[1]\tERR-write";
            $sel->remove($e->{s}); close $e->{s}; delete $fl{ fileno $e->{s} };
        }
    };
    if ($barrier) {
        $open->() while @queue;
        my $ready = $t->tmp . "/ready.$c";
        open my $fh, '>', $ready; close $fh;
        my $wait_until = time + 20;
        sleep 0.002 until -e $barrier || time > $wait_until;
        $send->($_) for values %fl;
    }
    while ((%fl || @queue) && time < $deadline) {
        while (!$barrier && @queue && keys(%fl) < $window) {
            my $s = $open->() or next;
            $send->($fl{ fileno $s });
        }
        for my $s ($sel->can_read(0.5)) {
            my $e = $fl{ fileno $s } or next;
            my $n = sysread($s, my $chunk, 65536);
            next if !defined $n && $!{EAGAIN};
            if ($n) { $e->{buf} .= $chunk; next }
            $sel->remove($s);
            delete $fl{ fileno $s };
            close $s;
            my $r = parse_response($e->{buf});
            if (!$r->{status}) { push @out, "$e->{r}[0]\t$e->{r}[1]\tERR-response"; next }
            push @out, join "\t", $e->{r}[0], $e->{r}[1], $r->{status}, map { $r->{headers}{$_} // '-' }
                'x-rl-status', 'x-ratelimit-remaining', 'x-ratelimit-limit', 'ratelimit-policy', 'retry-after';
        }
    }
    push @out, "$_->{r}[0]\t$_->{r}[1]\tERR-timeout" for values %fl;
    push @out, "$_->[0]\t$_->[1]\tERR-not-sent" for @queue;
    return @out;
}

# Forks the clients; $make->($c) gives client $c's request list.
sub phase {
    my ($name, $make, $window, $barrier) = @_;
    my @pids;
    unlink glob($t->tmp . '/ready.*'), $t->tmp . '/go';
    for my $c (0 .. $CLIENTS - 1) {
        my $pid = fork;
        die "fork: $!" unless defined $pid;
        if ($pid == 0) {
            my @out = eval { run_requests($make->($c), $window, $barrier ? $t->tmp . '/go' : undef, $c) };
            push @out, "client$c\t-\tERR-die:$@" if $@;
            open my $fh, '>', $t->tmp . "/out.$name.$c" or POSIX::_exit(1);
            print {$fh} "$_\n" for @out;
            close $fh;
            POSIX::_exit(0);
        }
        $RateLimitTest::CHILDREN{$pid} = 'client';
        push @pids, $pid;
    }
    my $t0 = time;
    if ($barrier) {
        my $deadline = time + 25;
        sleep 0.01 while (grep { -e $t->tmp . "/ready.$_" } 0 .. $CLIENTS - 1) < $CLIENTS && time < $deadline;
        $t0 = time;
        open my $fh, '>', $t->tmp . '/go'; close $fh;
    }
    for my $pid (@pids) {
        my $deadline = time + 50;
        while (waitpid($pid, POSIX::WNOHANG()) == 0) {
            if (time > $deadline) { kill 'KILL', $pid; waitpid($pid, 0); last }
            sleep 0.02;
        }
        delete $RateLimitTest::CHILDREN{$pid};
    }
    my $el = time - $t0;
    my @res;
    for my $c (0 .. $CLIENTS - 1) {
        open my $fh, '<', $t->tmp . "/out.$name.$c" or next;
        while (<$fh>) {
            chomp;
            my ($subj, $zone, $st, $rs, $rem, $lim, $pol, $ra) = split /\t/;
            push @res, { subj => $subj, zone => $zone, status => $st, rs => $rs // '-', rem => $rem // '-',
                lim => $lim // '-', policy => $pol // '-', retry => $ra // '-' };
        }
    }
    return ($el, @res);
}

sub subjects_of {
    my ($c) = @_;
    return map { my $j = $c * $PER + $_; ["k$j", zone_of($j), $j] } 0 .. $PER - 1;
}

# ---------------------------------------------------------------------------

$t->start_redis;
$t->write_conf(<<'EOC', main => 'worker_rlimit_nofile 16384;');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=10s;
ratelimit_zone za key=$http_x_api_key limit=5 window=120s;
ratelimit_zone zb key=$http_x_api_key limit=3 window=120s;
server {
    listen 127.0.0.1:%%PORT%% backlog=4096;
    access_log off;
    add_header X-RL-Status "$ratelimit_status" always;
    location /a/ { ratelimit zone=za; alias %%TMP%%/html/; }
    location /b/ { ratelimit zone=zb; alias %%TMP%%/html/; }
}
EOC
{   # the harness writes 1024 worker_connections: not enough for this test
    my $conf = RateLimitTest::_read_file($t->conf_path);
    $conf =~ s/worker_connections\s+\d+;/worker_connections 4096;/ or die 'worker_connections not found';
    RateLimitTest::_write_file($t->conf_path, $conf);
}
$t->start_nginx;
{
    my $r = $t->get('/a/index.html', { 'X-Api-Key' => 'warm' });
    is($r->{status} . '/' . ($r->{headers}{'x-rl-status'} // '-'), '200/PASSED', 'warm-up request PASSED');
}
my $N = $CLIENTS * $PER;

# --- phase 1: one request per subject, all in flight together -----------------
{
    my ($el, @res) = phase('p1', sub { [ subjects_of($_[0]) ] }, $PER, 1);
    note(sprintf 'phase 1: %d responses in %.2fs', scalar @res, $el);
    is(scalar @res, $N, "phase 1: $N results");
    my @err = grep { $_->{status} !~ /^\d+$/ } @res;
    is(scalar @err, 0, 'phase 1: every request answered') or diag(join "\n", map { "$_->{subj} $_->{status}" } @err[0 .. ($#err < 9 ? $#err : 9)]);
    my %seen;
    $seen{ $_->{subj} }++ for @res;
    is(scalar keys %seen, $N, 'phase 1: one result per subject');
    my @bad = grep {
        my $l = $LIMIT{ $_->{zone} };
        !($_->{status} eq '200' && $_->{rs} eq 'PASSED' && $_->{rem} eq ($l - 1) && $_->{lim} eq $l
          && $_->{policy} =~ /^"z$_->{zone}";/)
    } @res;
    is(scalar @bad, 0, 'phase 1: every subject saw 200 PASSED, remaining = its own limit - 1, its own zone')
        or diag(join "\n", map { join ' ', @$_{qw(subj zone status rs rem lim policy)} } @bad[0 .. ($#bad < 9 ? $#bad : 9)]);
}

# --- phase 2: each subject its own number of requests, mixed together ---------------
{
    my $make = sub {
        my ($c) = @_;
        my @r;
        for my $s (subjects_of($c)) {
            push @r, [$s->[0], $s->[1]] for 1 .. extra_of($s->[2]);
        }
        # interleave deterministically: same subject's requests apart
        my @o = sort { ($a->[2] <=> $b->[2]) || ($a->[3] <=> $b->[3]) }
            map { my $k = $r[$_]; [$k->[0], $k->[1], ($_ * 7919) % 997, $_] } 0 .. $#r;
        return [ map { [$_->[0], $_->[1]] } @o ];
    };
    my $expected = 0;
    $expected += extra_of($_) for 0 .. $N - 1;
    my ($el, @res) = phase('p2', $make, $WINDOW, 0);
    note(sprintf 'phase 2: %d responses in %.2fs', scalar @res, $el);
    is(scalar @res, $expected, "phase 2: $expected results");
    my @err = grep { $_->{status} !~ /^\d+$/ } @res;
    is(scalar @err, 0, 'phase 2: every request answered') or diag(join "\n", map { "$_->{subj} $_->{status}" } @err[0 .. ($#err < 9 ? $#err : 9)]);
    my @errs = grep { $_->{rs} eq 'ERROR' } @res;
    is(scalar @errs, 0, 'phase 2: no redis errors');

    my %by;
    push @{ $by{ $_->{subj} } }, $_ for @res;
    my (@wrong, @wrong_redis);
    for my $j (0 .. $N - 1) {
        my $subj = "k$j";
        my $l = $LIMIT{ zone_of($j) };
        my $m = extra_of($j);
        my $adm = $m < $l - 1 ? $m : $l - 1;
        my @r = @{ $by{$subj} // [] };
        my @ok = grep { $_->{status} eq '200' && $_->{rs} eq 'PASSED' } @r;
        my @rej = grep { $_->{status} eq '429' && $_->{rs} eq 'REJECTED' && $_->{rem} eq '0' && $_->{retry} =~ /^\d+$/ } @r;
        my $got = join ' ', sort { $b <=> $a } map { $_->{rem} } @ok;
        my $want = join ' ', map { $l - 1 - $_ } 1 .. $adm;
        my @lims = grep { $_->{lim} ne $l } @r;
        if (@r != $m || @ok != $adm || @rej != $m - $adm || $got ne $want || @lims) {
            push @wrong, sprintf '%s zone %s: sent %d, %d passed (remaining %s, want %s), %d rejected; statuses %s',
                $subj, zone_of($j), $m, scalar @ok, $got, $want, scalar @rej, join(',', map { "$_->{status}/$_->{rs}/$_->{lim}" } @r);
        }
    }
    is(scalar @wrong, 0, "phase 2: every subject's verdicts match its own count ($N subjects)")
        or diag(join "\n", @wrong[0 .. ($#wrong < 9 ? $#wrong : 9)]);

    my $t0 = time;
    for my $j (0 .. $N - 1) {
        my $l = $LIMIT{ zone_of($j) };
        my $m = extra_of($j);
        my $want = 1 + ($m < $l - 1 ? $m : $l - 1);
        my $got = $t->redis_window_total('rl:z' . zone_of($j) . ":k$j") // 'none';
        push @wrong_redis, "k$j: $got, want $want" if $got ne $want;
        last if time - $t0 > 10;
    }
    is(scalar @wrong_redis, 0, 'phase 2: redis holds each subject\'s own count')
        or diag(join "\n", @wrong_redis[0 .. ($#wrong_redis < 9 ? $#wrong_redis : 9)]);
}

$t->stop_nginx;
$t->stop_redis;
$t->final_checks;

done_testing;
