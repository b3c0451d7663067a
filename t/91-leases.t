#!/usr/bin/perl
# Quota leases (issue 28): `lease=SIZE` on a rate zone.  Two nginx servers
# of two workers each, one Redis.
#
# Expected (src/leases/README.md, docs/operations.md):
# - a limit far above the load: every request admitted, Redis asked for
#   few of them (calls per request printed, at most 0.1 here: the leases
#   start at one unit and grow with the observed rate), and once the
#   subject is quiet the units the leases held go back: Redis's count of
#   the window is then exactly the requests admitted;
# - one subject hammered over both servers at limit 1000 per 10 s: never
#   more than 1000 admitted in the window (no tolerance), and at least
#   1000 minus the bound (a server holds at most floor(remaining / 8) of
#   it: 2 x 125 here) once the subject went quiet and came back; the fixed
#   window's phase starts just after one of its boundaries (aligned on the
#   clock) and must end within the window;
# - a subject's override (issue 41) raised far above its zone's limit of
#   16: every request, those admitted from a lease too, says
#   X-RateLimit-Limit 100000, and the leases are sized by it (at most 0.25
#   Redis calls a request; sized by the zone's 16, 0.5 here); once it is
#   removed, every request says 16 again, those admitted from what the
#   leases still held too (the forgiving the PUT publishes makes the
#   servers forget it);
# - a server SIGKILLed while it holds leases: the other goes on limiting,
#   the window's admissions never above the limit.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use FaultTest qw(rhdr tally);
use HTTP::Tiny;
use POSIX ();

RateLimitTest::require_module();

my $t  = FaultTest->new(workers => 2);
my $t2 = FaultTest->new(workers => 2);
$t->start_redis;
my $REDIS_PORT = $t->redis_port;

my $conf = <<"EOF" . <<'EOF';
ratelimit_redis 127.0.0.1:$REDIS_PORT timeout=1s;
EOF
ratelimit_zone big key=$http_x_api_key limit=1000000 window=10s lease=1m;
ratelimit_zone svc key=$http_x_api_key limit=1000 window=10s lease=1m;
ratelimit_zone fx key=$http_x_api_key limit=1000 window=10s algorithm=fixed lease=1m;
ratelimit_zone ov key=$http_x_api_key limit=16 window=60s lease=1m;
server {
    listen 127.0.0.1:%%PORT%% reuseport;
    add_header X-RL-Status "$ratelimit_status" always;
    location /big/ { ratelimit zone=big; ratelimit_peek_header X-Peek; alias %%TMP%%/html/; }
    location /svc/ { ratelimit zone=svc; ratelimit_peek_header X-Peek; alias %%TMP%%/html/; }
    location /fx/  { ratelimit zone=fx;  ratelimit_peek_header X-Peek; alias %%TMP%%/html/; }
    location /ov/  { ratelimit zone=ov; alias %%TMP%%/html/; }
    location = /q  { ratelimit_query zone=ov override=on; }
}
EOF
$t->write_conf($conf);
$t2->write_conf($conf);
$t->start_nginx;
$t2->start_nginx;
my @SERVERS = ($t, $t2);

sub used {
    my ($loc, $key) = @_;
    my $r = FaultTest::raw_get($t->port('PORT'), "/$loc/index.html", { 'X-Api-Key' => $key, 'X-Peek' => 1 }, 3);
    return $r->{body} =~ /"used":(\d+)/ ? $1 : -1;
}

sub evalsha_calls {
    my $info = $t->redis('INFO', 'commandstats');
    my $n = 0;
    $n += $1 while $info =~ /cmdstat_(?:evalsha|eval|ratelimit\.decide):calls=(\d+)/g;
    return $n;
}

# $n requests of subject $key on $loc, $c at a time, dealt over @servers.
sub load {
    my ($loc, $key, $n, $c, @servers) = @_;
    @servers = @SERVERS unless @servers;
    my %tally = (p => 0, r => 0, o => 0);
    for (my $i = 0; $i < $n; $i += $c) {
        my $k = $n - $i < $c ? $n - $i : $c;
        my ($p, $r, $o) = split m{/}, tally($t->burst($k, sub {
            ("/$loc/index.html", { 'X-Api-Key' => $key }, $servers[ ($i + $_[0]) % @servers ]->port('PORT'));
        }, 5));
        $tally{p} += $p; $tally{r} += $r; $tally{o} += $o;
    }
    return %tally;
}

my $ok;
for (1 .. 100) {
    my $r = FaultTest::raw_get($t->port('PORT'), '/big/index.html', { 'X-Api-Key' => "warm$_" }, 3);
    last if $ok = (rhdr($r, 'X-RL-Status') // '') eq 'PASSED';
    sleep 0.03;
}
ok($ok, 'Redis up');

# 1. Far above the load.
{
    my $calls0 = evalsha_calls();
    my %got = load('big', 'hot', 3000, 20);
    my $calls = evalsha_calls() - $calls0;
    is($got{p}, 3000, 'limit far above the load: all 3000 admitted');
    my $per = $calls / 3000;
    diag(sprintf('Redis calls per request with leases: %.4f (%d calls)', $per, $calls));
    cmp_ok($per, '<=', 0.1, 'few Redis calls per request');
    sleep 1.6;    # quiet: the leases give their units back
    is(used('big', 'hot'), 3000, "quiet: Redis's count is the requests admitted (the leases' units came back)");
}

# 2. Hammered at the limit: never above it, near it once quiet and back.
for my $loc ('svc', 'fx') {
    # The fixed window of 10 s is aligned on Redis's clock (this machine's):
    # the phase starts just after a boundary, so that it fits in one window.
    if ($loc eq 'fx') {
        sleep 0.05 while time - 10 * int(time / 10) > 0.2;
    }
    my $t0 = time;
    my %got = load($loc, "ham$loc", 1400, 20);
    cmp_ok($got{p}, '<=', 1000, "$loc: hammered, admitted $got{p}: never above 1000");
    sleep 1.6;
    my %more = load($loc, "ham$loc", 300, 10);
    my $total = $got{p} + $more{p};
    cmp_ok(time - $t0, '<', 9.5, sprintf('%s: the phase took %.1f s, within one window', $loc, time - $t0))
        if $loc eq 'fx';
    cmp_ok($total, '<=', 1000, "$loc: in the window, admitted $total <= 1000");
    cmp_ok($total, '>=', 1000 - 250, "$loc: admitted $total >= 1000 - 250 (the bound)");
    diag("$loc: admitted $got{p} hammered, $total after the leases came back; Redis's count " . used($loc, "ham$loc"));
}

# The X-RateLimit-Limit of $n requests of $key in zone ov, 20 at a time
# over both servers: { limit => responses }, and how many passed.
sub ov_limits {
    my ($key, $n) = @_;
    my (%limits, $passed);
    for (my $i = 0; $i < $n; $i += 20) {
        for my $r ($t->burst(20, sub {
            ('/ov/index.html', { 'X-Api-Key' => $key }, $SERVERS[ $_[0] % 2 ]->port('PORT'));
        }, 5)) {
            $limits{ rhdr($r, 'X-RateLimit-Limit') // '-' }++;
            $passed++ if $r->{status} == 200;
        }
    }
    return (\%limits, $passed // 0);
}

sub put_override {
    my ($query) = @_;
    return HTTP::Tiny->new(timeout => 5)->request('PUT', $t->url("/q?zone=ov&$query"))->{status};
}

# 3. An override raised far above the zone's limit, then removed.
{
    is(put_override('key=raised&limit=100000'), 204, 'override: raised to 100000 (zone ov: 16)');
    my $calls0 = evalsha_calls();
    my ($limits, $passed) = ov_limits('raised', 1000);
    my $per = (evalsha_calls() - $calls0) / 1000;
    is($passed, 1000, 'override: all 1000 admitted');
    is(join(' ', sort keys %$limits), '100000',
        'override: every request, from a lease or from Redis, says X-RateLimit-Limit 100000');
    diag(sprintf('override: Redis calls per request %.4f', $per));
    cmp_ok($per, '<=', 0.25, 'override: the leases are sized by it, not by the limit of 16');

    is(put_override('key=raised&limit=default'), 204, 'override: removed');
    sleep 0.1;    # the message reaches the workers as the reply reaches the client
    ($limits, $passed) = ov_limits('raised', 40);
    diag("override removed: $passed of 40 admitted from what the leases held");
    is(join(' ', sort keys %$limits), '16', "override removed: every request says the zone's 16");
}

# 4. A server killed while it holds leases.
{
    my %a = load('svc', 'killed', 400, 20);
    my @pids = ($t2->nginx_pid, map { $_ } $t2->can('live_workers') ? $t2->live_workers : ());
    kill 'KILL', @pids;
    sleep 0.2;
    my %b = load('svc', 'killed', 1000, 20, $t);
    my $total = $a{p} + $b{p};
    cmp_ok($total, '<=', 1000, "a server killed with its leases: admitted $total <= 1000");
    cmp_ok($total, '>=', 1000 - 250, "a server killed: admitted $total >= 1000 - 250 (what it held is lost until its bucket leaves)");
    diag("killed: $a{p} before, $b{p} after on the survivor");
}

$t->stop_and_check('leases');
done_testing;
