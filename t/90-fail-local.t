#!/usr/bin/perl
# ratelimit_fail local (issue 28): two nginx servers of two workers each,
# one Redis, zone "api" of 20 per 10 s.
#
# Expected (spec-28-fail-local):
# - while Redis is up, both servers announce themselves: the set
#   rl:servers holds 2 members;
# - Redis killed (SIGKILL) or stalled (SIGSTOP): the first request of a
#   worker is decided within `timeout` (200 ms), the others at once (no
#   timeout each: at most one slow request per worker); each server admits
#   exactly its half, 10, of a subject hammered in one window (fixed
#   windows aligned on the zone's 10 s), X-RateLimit-Limit 10; a location
#   with servers=3 admits 7;
# - Redis back (started on the same port, or SIGCONT): within 1 s the
#   requests are counted in Redis again; stalled as soon as it is back,
#   while the servers announce themselves again one by one in its empty
#   set, the share stays a half;
# - a server that stops announcing (paused) is counted out 3 s after its
#   member expired, not at once; counted again at once when it is back;
# - a subject whose override (issue 41) of 4 each server heard from Redis
#   before it went: each server admits its half of the override, 2; once
#   Redis restarted empty (the override lost with it), its share of the
#   zone's limit again; the same where the subject's limit is a map's 0
#   (zone "plans"): 2 each while the override is known, none once it is
#   lost, none for a blocked subject without one;
# - metrics: local decisions per zone and the time spent local.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use HTTP::Tiny;
use Time::HiRes qw(time sleep);
use RateLimitTest qw(hdr sleep_until_phase);

RateLimitTest::require_module();

my $TIMEOUT = 0.2;
my $MARGIN = 0.5;       # a shared 2-core machine
my $FAST = 0.1;         # a request that waited for no timeout
my $WINDOW = 10;

my $STOPPED;            # pid of a SIGSTOPped redis
my $PAUSED;             # pids of a SIGSTOPped nginx
END { kill 'CONT', $STOPPED if $STOPPED; kill 'CONT', @$PAUSED if $PAUSED }

my $t  = RateLimitTest->new(workers => 2);
my $t2 = RateLimitTest->new(workers => 2);
$t->start_redis;
my $REDIS_PORT = $t->redis_port;

my $CONF = <<"EOF" . <<'EOF';
ratelimit_redis 127.0.0.1:$REDIS_PORT timeout=200ms connect_timeout=200ms;
EOF
ratelimit_zone api key=$http_x_api_key limit=20 window=10s;
map $http_x_api_key $plan { default 20; ~^blocked 0; }
ratelimit_zone plans key=$http_x_api_key limit=$plan window=10s;
server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    location /local/ { ratelimit zone=api; ratelimit_fail local; alias %%TMP%%/html/; }
    location /third/ { ratelimit zone=api; ratelimit_fail local servers=3; alias %%TMP%%/html/; }
    location = /metrics { ratelimit_metrics; }
    location /plans/ { ratelimit zone=plans; ratelimit_fail local; alias %%TMP%%/html/; }
    location = /q { ratelimit_query zone=api zone=plans override=on; }
}
EOF
$t->write_conf($CONF);
$t2->write_conf($CONF);
$t->start_nginx;
$t2->start_nginx;
my @SERVERS = ($t, $t2);

# $n requests in a row to one server: [status, elapsed, limit header].
sub burst {
    my ($s, $loc, $key, $n) = @_;
    return map {
        my $r = $s->get_as($loc, $key);
        [$r->{status}, $r->{elapsed}, hdr($r, 'X-RateLimit-Limit') // '-']
    } 1 .. $n;
}

sub admitted { scalar grep { $_->[0] == 200 } @_ }

# The first requests after Redis went away: each server's first within the
# timeout, at most one slow request per worker, then each server hammered
# in one window admits its half.
sub check_local {
    my ($what, $tag, $override) = @_;
    my @first = map { [burst($_, 'local', "$tag-first", 1)] } @SERVERS;
    for my $i (0, 1) {
        my $e = $first[$i][0][1];
        ok($e < $TIMEOUT + $MARGIN,
            sprintf('%s: server %d: first request decided in %.3f s', $what, $i + 1, $e));
    }

    sleep_until_phase($WINDOW, 0.3);
    for my $i (0, 1) {
        my @r = burst($SERVERS[$i], 'local', "$tag-h", 40);
        my @slow = grep { $_->[1] > $FAST } @r;
        my ($max) = sort { $b <=> $a } map { $_->[1] } @r;
        ok(@slow <= 1, sprintf('%s: server %d: %d of 40 slower than %.1f s (max %.3f s)',
            $what, $i + 1, scalar @slow, $FAST, $max));
        is(admitted(@r), 10, "$what: server " . ($i + 1) . ": 10 of 40 admitted in one window");
        is($r[0][2], 10, "$what: server " . ($i + 1) . ": X-RateLimit-Limit is the local share");
    }
    is(admitted(burst($t, 'third', "$tag-t", 20)), 7, "$what: servers=3: 7 of 20 admitted");
    for my $i (0, 1) {
        is(admitted(burst($SERVERS[$i], 'local', 'ov', 6)), $override ? 2 : 6,
            "$what: server " . ($i + 1) . ': '
            . ($override ? "its half of the subject's override (4)"
                         : 'the override Redis lost is forgotten: 6 of 6'));
        is(admitted(burst($SERVERS[$i], 'plans', 'blocked-ov', 6)), $override ? 2 : 0,
            "$what: server " . ($i + 1) . ": a map's 0: "
            . ($override ? "its half of the subject's override (4)" : 'none, the override lost'));
        is(admitted(burst($SERVERS[$i], 'plans', "blocked-$tag", 3)), 0,
            "$what: server " . ($i + 1) . ": a map's 0 without an override: none");
    }
}

# The time from $since until a request of each server is counted in Redis.
sub hand_back {
    my ($what, $since, $tag) = @_;
    for my $i (0, 1) {
        my $key = "$tag-back$i";
        my $at = RateLimitTest::wait_until(sub {
            $SERVERS[$i]->get_as('local', $key);
            my $n = eval { $t->redis_window_total("rl:api:$key") };
            return $n && $n > 0;
        }, 5);
        ok(defined $at && $at - $since <= 1 + $MARGIN,
            sprintf('%s: server %d: counted in redis again after %s', $what, $i + 1,
                defined $at ? sprintf('%.3f s', $at - $since) : 'never'));
    }
}

# --- both servers announce themselves -------------------------------------------

{
    my $at = RateLimitTest::wait_until(sub { ($t->redis('ZCARD', 'rl:servers') // 0) == 2 }, 5);
    ok(defined $at, 'redis up: both servers in rl:servers');
    my $members = $t->redis('ZRANGE', 'rl:servers', 0, -1);
    is(scalar @$members, 2, 'redis up: two members: ' . join(' ', @$members));
    my $ttl = $t->redis('PTTL', 'rl:servers');
    ok($ttl > 0 && $ttl <= 3000, "redis up: the set expires ($ttl ms)");

    my @r = burst($t, 'local', 'up', 3);
    is(join(' ', map { $_->[0] } @r), '200 200 200', 'redis up: passed');
    is($t->redis_window_total('rl:api:up'), 3, 'redis up: counted in redis');
    is($r[0][2], 20, 'redis up: X-RateLimit-Limit is the fleet limit');

    is(HTTP::Tiny->new->request('PUT', $t->url('/q?zone=api&key=ov&limit=4'))->{status}, 204,
        'redis up: an override of 4 for "ov"');
    is(join(' ', map { $_->get_as('local', 'ov')->{status} } @SERVERS), '200 200',
        'redis up: each server heard of it');
    is(HTTP::Tiny->new->request('PUT', $t->url('/q?zone=plans&key=blocked-ov&limit=4'))->{status}, 204,
        'redis up: an override of 4 for "blocked-ov", whose plan is 0');
    is(join(' ', map { $_->get_as('plans', 'blocked-ov')->{status} } @SERVERS), '200 200',
        'redis up: each server heard of that one');
    sleep 1.2;    # every worker has read the count
}

# --- redis killed --------------------------------------------------------------

{
    kill 'KILL', $t->redis_pid;
    delete $t->{redis_pid};
    $t->_redis_close;
    check_local('redis killed', 'k', 1);

    $t->start_redis(port => $REDIS_PORT);
    hand_back('redis restarted', time, 'k');
}

# --- redis stalled as soon as it is back: the servers announce themselves
# again one by one in its empty set, and the count learnt before is kept ---

{
    $STOPPED = $t->redis_pid;
    kill 'STOP', $STOPPED;
    my @r = burst($t, 'local', 's-first', 1);
    ok($r[0][1] >= $TIMEOUT - 0.05 && $r[0][1] < $TIMEOUT + $MARGIN,
        sprintf('redis stalled: the first request waited the timeout (%.3f s)', $r[0][1]));
    is("$r[0][0] $r[0][2]", '200 10', 'redis stalled: the waiting request got the local decision');
    check_local('redis stalled', 's', 0);

    kill 'CONT', $STOPPED;
    undef $STOPPED;
    hand_back('redis resumed', time, 's');
    my @e = burst($t, 'local', 's-exact', 22);
    is(admitted(@e), 20, 'redis resumed: the fleet limit applies again');
    my $at = RateLimitTest::wait_until(sub { ($t->redis('ZCARD', 'rl:servers') // 0) == 2 }, 3);
    ok(defined $at, 'redis resumed: both servers announced again');
}

# --- a server that stops announcing --------------------------------------------

# The live members by Redis's clock, as the module counts them.
sub live_count {
    return $t->redis('EVAL', "local t = redis.call('TIME') "
        . "return redis.call('ZCOUNT', KEYS[1], t[1] * 1000 + math.floor(t[2] / 1000) + 1, '+inf')",
        1, 'rl:servers');
}

# The local share server 1 applies now: Redis stalled for one request.
sub share_now {
    my ($key) = @_;
    $STOPPED = $t->redis_pid;
    kill 'STOP', $STOPPED;
    my ($r) = burst($t, 'local', $key, 1);
    kill 'CONT', $STOPPED;
    undef $STOPPED;
    return $r->[2];
}

{
    my @paused = ($t2->nginx_pid, $t2->worker_pids);
    $PAUSED = \@paused;
    kill 'STOP', @paused;
    my $gone = RateLimitTest::wait_until(sub { live_count() == 1 }, 5);
    ok(defined $gone, 'server 2 paused: its member expired');
    sleep 1.2;    # every worker of server 1 has counted 1
    is(share_now('p-recent'), 10, 'server 2 paused: still counted for 3 s after its member expired');
    sleep 4.5;    # the first count of 1 came within 1 s of the expiry
    is(share_now('p-gone'), 20, 'server 2 paused: counted out after 3 s more');
    kill 'CONT', @paused;
    undef $PAUSED;
    my $back = RateLimitTest::wait_until(sub { live_count() == 2 }, 3);
    ok(defined $back, 'server 2 resumed: announced again');
    sleep 1.2;
    is(share_now('p-back'), 10, 'server 2 resumed: counted again at once');
}

# --- metrics and log ------------------------------------------------------------

{
    my $m = $t->get('/metrics')->{content};
    my ($passed) = $m =~ /^nginx_ratelimit_local_decisions_total\{zone="api",decision="passed"\} (\d+)$/m;
    my ($rejected) = $m =~ /^nginx_ratelimit_local_decisions_total\{zone="api",decision="rejected"\} (\d+)$/m;
    my ($secs) = $m =~ /^nginx_ratelimit_local_seconds_total ([\d.]+)$/m;
    ok(defined $passed && $passed >= 2 * 10 + 7, 'metrics: local passed ' . ($passed // 'none'));
    ok(defined $rejected && $rejected >= 2 * 30 + 13, 'metrics: local rejected ' . ($rejected // 'none'));
    ok(defined $secs && $secs > 1, 'metrics: local seconds ' . ($secs // 'none'));
    my $j = $t->get('/metrics?format=json')->{content};
    like($j, qr/"local":\{"passed":\d+,"rejected":\d+\}/, 'metrics JSON: local decisions');
    like($j, qr/"local_seconds":[\d.]+/, 'metrics JSON: local seconds');

    for my $s (@SERVERS) {
        ok($s->count_log(qr/deciding "ratelimit_fail local" requests locally/) >= 1, 'log: going local');
        ok($s->count_log(qr/handing "ratelimit_fail local" requests back/) >= 1, 'log: handing back');
    }
}

ok($t->stop_nginx, 'graceful stop');
ok($t2->stop_nginx, 'graceful stop, second server');
$t->no_alerts;
$t2->no_alerts;
done_testing;
