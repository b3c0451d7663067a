#!/usr/bin/perl
# A subject's own limit (issue 41), read from its side key in the call that
# decides it.  Two nginx servers of two workers each, one Redis, whose
# configuration has `ratelimit_query ... override=on`: every rate zone
# reads its subjects' overrides.  First the side keys and markers are
# written with Redis commands (docs/operations.md "Redis data layout"),
# once through the window script and once through the Redis module's
# command; then set through the status API's PUT.
#
# Expected: an override "o=L,W,X" in force (X = 0, or X later than Redis's
# time in ms) in the side key "rl:ZONE+:SUBJECT" applies while the zone's
# marker "rl:ZONE+" exists: a window zone admits L a window, a GCRA zone
# takes L per W ms, a zone whose limit is a variable takes L too; on both
# servers; X-RateLimit-Limit and RateLimit-Policy say L.  L = 0 answers
# 429 with Retry-After until X.  A limit or rate variable's 0 (a map that
# blocks a plan) is the zone's limit: the override lifts it; without one,
# or without Redis, it refuses.  Without the marker, lapsed, or malformed:
# the zone's own limit.  PUT ?zone=&key=&limit=N[&ttl=S] (a GCRA zone's
# rate=Nr/m; limit=default removes) answers 204 once Redis has the
# override, which the next request on the other server obeys; a lowered
# limit admits no more than it at once; a raised or removed one lets the
# next request through on every worker that remembered rejecting the
# subject; ttl= lapses in Redis, and no worker remembers a rejection past
# it; logged at notice with the client's address and the limit replaced
# ("was none" where the side value held none in bounds), counted in the
# metrics (override_changes); GET reports "override" and "override_ttl" (-1: never;
# a GCRA zone's "override_rate" too).  Without override=on, 405; a bad
# parameter, 400 with its reason.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use HTTP::Tiny;
use Time::HiRes qw(sleep);
use RateLimitTest qw(hdr);

RateLimitTest::require_module();
my $SO = RateLimitTest::redis_module_so() or BAIL_OUT('redis module not built');

my $t  = RateLimitTest->new(workers => 2);
my $t2 = RateLimitTest->new(workers => 2);
my $REDIS_PORT = $t->redis_port;

my $conf = <<"EOF" . <<'EOF';
ratelimit_redis 127.0.0.1:$REDIS_PORT timeout=2s;
EOF
map $http_x_plan $plan_limit { default 3; big 50; blocked 0; }
map $http_x_plan $plan_rate { default 1r/m; blocked 0r/s; }
ratelimit_zone z key=$http_x_api_key limit=5 window=60s;
ratelimit_zone g key=$http_x_api_key rate=1r/m algorithm=gcra;
ratelimit_zone v key=$http_x_api_key limit=$plan_limit window=60s;
ratelimit_zone gv key=$http_x_api_key rate=$plan_rate window=60s algorithm=gcra;
server {
    listen 127.0.0.1:%%PORT%% reuseport;
    location /z/ { ratelimit zone=z; alias %%TMP%%/html/; }
    location /g/ { ratelimit zone=g; alias %%TMP%%/html/; }
    location /v/ { ratelimit zone=v; alias %%TMP%%/html/; }
    location /gv/ { ratelimit zone=gv; alias %%TMP%%/html/; }
    location = /q { ratelimit_query zone=z zone=g zone=v zone=gv override=on; }
    location = /ro { ratelimit_query zone=z delete=on; }
    location = /metrics { ratelimit_metrics; }
}
EOF
$t->write_conf($conf);
$t2->write_conf($conf);
my @SERVERS = ($t, $t2);

sub ask {
    my ($srv, $loc, $key, $plan) = @_;
    return $srv->get("/$loc/index.html",
        { 'X-Api-Key' => $key, defined $plan ? ('X-Plan' => $plan) : () });
}

# The statuses of $n requests of $key (of $plan) in $loc, alternating
# servers.
sub statuses {
    my ($loc, $key, $n, $plan) = @_;
    return join ' ', map { ask($SERVERS[$_ % 2], $loc, $key, $plan)->{status} } 0 .. $n - 1;
}

for my $implementation ('script', 'command') {
    my $module = $implementation eq 'command';
    $t->start_redis(redis_module => $module);
    $_->start_nginx for @SERVERS;
    my $now = $t->redis_time_ms;

    # --- no marker: side keys are not read -----------------------------
    $t->redis('SET', 'rl:z+:a', 'o=8,60000,0');
    is(statuses('z', 'a', 7), '200 200 200 200 200 429 429',
        "$implementation: without the zone's marker, its limit (5)");

    # --- the marker: overrides apply on both servers -------------------
    $t->redis('ZADD', 'rl:z+', 0, 'rl:z+:b');
    $t->redis('SET', 'rl:z+:b', 'o=8,60000,0');
    my $r = ask($t2, 'z', 'b');
    is(hdr($r, 'X-RateLimit-Limit'), 8, "$implementation: X-RateLimit-Limit is the override's");
    like(hdr($r, 'RateLimit-Policy') // '', qr/"z";q=8;w=60/, "$implementation: so is RateLimit-Policy");
    is(statuses('z', 'b', 8), '200 200 200 200 200 200 200 429',
        "$implementation: 8 a window on both servers, not 5");

    $t->redis('SET', 'rl:z+:c', 'o=2,60000,0');
    is(statuses('z', 'c', 3), '200 200 429', "$implementation: a lower override holds");

    $t->redis('SET', 'rl:z+:d', 'o=100,60000,' . ($now - 1000));
    is(statuses('z', 'd', 6), '200 200 200 200 200 429', "$implementation: a lapsed override is none");
    $t->redis('SET', 'rl:z+:e', 'o=x;o=100,60000,0;b=1');
    is(hdr(ask($t, 'z', 'e'), 'X-RateLimit-Limit'), 100,
        "$implementation: the first part of the form o=L,W,X is the override");
    $t->redis('SET', 'rl:z+:f', 'o=100,60000');
    is(hdr(ask($t, 'z', 'f'), 'X-RateLimit-Limit'), 5, "$implementation: a malformed one is none");

    # --- limit 0: refused until the override lapses --------------------
    $t->redis('SET', 'rl:z+:zero', 'o=0,60000,' . ($t->redis_time_ms + 30_000));
    $r = ask($t, 'z', 'zero');
    is($r->{status}, 429, "$implementation: limit 0 refuses");
    my $after = hdr($r, 'Retry-After') // 0;
    ok($after > 25 && $after <= 30, "$implementation: Retry-After $after until it lapses (30 s)");
    is(hdr($r, 'X-RateLimit-Limit'), 0, "$implementation: X-RateLimit-Limit 0");

    # --- a GCRA zone takes the override's rate ------------------------
    $t->redis('SET', 'rl:g+', 1);
    is(statuses('g', 'slow', 2), '200 429', "$implementation: GCRA, its rate (1r/m)");
    $t->redis('SET', 'rl:g+:fast', 'o=600000,60000,0');
    is(statuses('g', 'fast', 4), '200 200 200 200', "$implementation: GCRA at the override's 10000r/s");
    like(hdr(ask($t, 'g', 'fast'), 'RateLimit-Policy') // '', qr/"g";q=1;w=1\b/,
        "$implementation: RateLimit-Policy at its rate");

    # --- a zone whose limit is a variable ------------------------------
    $t->redis('SET', 'rl:v+', 1);
    $t->redis('SET', 'rl:v+:p', 'o=4,60000,0');
    is(statuses('v', 'p', 5), '200 200 200 200 429', "$implementation: the override wins over limit=\$var (3)");
    like($t->get('/metrics')->{content}, qr/^nginx_ratelimit_zone_limit\{zone="v"\} 4$/m,
        "$implementation: the zone's limit metric is the override's");
    $r = ask($t, 'v', 'shut', 'blocked');
    is($r->{status}, 429, "$implementation: a map's limit of 0 refuses");
    is(hdr($r, 'X-RateLimit-Limit'), 0, "$implementation: X-RateLimit-Limit 0");
    $t->redis('SET', 'rl:v+:open', 'o=2,60000,0');
    is(statuses('v', 'open', 3, 'blocked'), '200 200 429', "$implementation: the override lifts a map's 0");
    $t->redis('SET', 'rl:gv+', 1);
    is(statuses('gv', 'shut', 2, 'blocked'), '429 429', "$implementation: a map's rate of 0 refuses");
    $t->redis('SET', 'rl:gv+:open', 'o=600000,60000,0');
    is(statuses('gv', 'open', 3, 'blocked'), '200 200 200', "$implementation: the override lifts a map's 0r/s");

    if ($module) {
        my $stats = $t->redis('INFO', 'commandstats');
        like($stats, qr/cmdstat_ratelimit\.decide:calls=\d+/, 'the Redis module decided');
        unlike($stats, qr/cmdstat_evalsha/, 'not the script');
    }

    $_->stop_nginx for @SERVERS;
    $_->no_alerts for @SERVERS;
    $t->stop_redis;
}

# --- the PUT ----------------------------------------------------------------

sub put {
    my ($srv, $query) = @_;
    return HTTP::Tiny->new(timeout => 5)->request('PUT', $srv->url("/q?$query"));
}

# Requests of subject $key in zone z, $n on each server; returns { pid =>
# [statuses] } from each server's access log.
sub round {
    my ($key, $n) = @_;
    my %by_pid;
    for my $srv (@SERVERS) {
        my $before = () = grep { $_->{uri} eq '/z/index.html' } $srv->access_entries;
        ask($srv, 'z', $key) for 1 .. $n;
        my @e = $srv->access_entries_for(sub { $_->{uri} eq '/z/index.html' }, $before + $n);
        push @{ $by_pid{ $_->{pid} } }, $_->{status} for @e[$before .. $#e];
    }
    return \%by_pid;
}

# Rounds of $key until every worker of both servers has rejected it (and so
# remembers it): true if they all did.
sub all_reject {
    my ($key) = @_;
    my %seen;
    for (1 .. 6) {
        my $r = round($key, 20);
        for my $pid (keys %$r) {
            $seen{$pid} = 1 if grep { $_ == 429 } @{ $r->{$pid} };
        }
        return 1 if keys %seen == 4;
    }
    return 0;
}

# The first status of $key on each worker of both servers, in pid order.
sub first_on_each {
    my ($key) = @_;
    my %first;
    for (1 .. 4) {
        my $r = round($key, 6);
        $first{$_} //= $r->{$_}[0] for keys %$r;
        last if keys %first == 4;
    }
    return join ' ', map { $first{$_} } sort keys %first;
}

$t->start_redis;
$_->start_nginx for @SERVERS;

is(HTTP::Tiny->new->request('PUT', $t->url('/ro?zone=z&key=a&limit=9'))->{status}, 405,
    'PUT where override=on is not given: 405');
for my $bad (['key=a&limit=9', qr/missing zone/],
             ['zone=z&limit=9', qr/key/],
             ['zone=z&key=a', qr/missing limit/],
             ['zone=z&key=a&limit=-1', qr/limit must be a whole number/],
             ['zone=z&key=a&limit=9&ttl=0', qr/ttl must be whole seconds/],
             ['zone=z&key=a&rate=5r/s', qr/counts requests per window/],
             ['zone=g&key=a&limit=9', qr/GCRA zone takes a rate/],
             ['zone=g&key=a&rate=5', qr/rate must be/],
             ['zone=nope&key=a&limit=9', qr/no such zone/]) {
    my $r = put($t, $bad->[0]);
    is($r->{status}, 400, "PUT ?$bad->[0]: 400");
    like($r->{content}, $bad->[1], "PUT ?$bad->[0]: says why");
}

# A PUT through one server, the next request on the other.
my $r = put($t, 'zone=z&key=p1&limit=7');
is($r->{status}, 204, 'PUT ?zone=z&key=p1&limit=7: 204');
is(hdr(ask($t2, 'z', 'p1'), 'X-RateLimit-Limit'), 7, 'the other server applies it at once');
is($t->wait_log(qr/\[notice\] .*ratelimit: zone "z", key "p1" limit 7 until removed \(was none\) by 127\.0\.0\.1, 4 workers told/, 1), 1,
    'logged at notice: the change, the address, the workers told');
is($t->redis('GET', 'rl:z+:p1'), 'o=7,60000,0', 'the side key holds it');
is($t->redis('TTL', 'rl:z+:p1'), -1, 'until removed: no expiry');
is($t->redis('ZSCORE', 'rl:z+', 'rl:z+:p1'), 'inf', 'the marker lists it, for ever');

# Lowered: exactly the new limit from the moment the PUT is answered.
statuses('z', 'p2', 4);
is(put($t, 'zone=z&key=p2&limit=7')->{status}, 204, 'lowered to the count + 3');
is(scalar(grep { $_ == 200 } split / /, statuses('z', 'p2', 20)), 3,
    'exactly 3 of 20 requests across both servers are admitted');

# Remembered rejections answer with the override's limit, as Redis's did.
is(put($t, 'zone=z&key=p6&limit=2')->{status}, 204, 'p6 held to 2');
my %limits;
for (1 .. 10) {
    for my $srv (@SERVERS) {
        my $r6 = ask($srv, 'z', 'p6');
        $limits{hdr($r6, 'X-RateLimit-Limit')}++ if $r6->{status} == 429;
    }
}
is(join(' ', sort keys %limits), '2', 'every 429, from Redis or from memory, says X-RateLimit-Limit 2');

# Raised: every worker remembered rejecting p3, and lets it through at once.
ok(all_reject('p3'), 'every worker of both servers rejected "p3"');
$r = put($t2, 'zone=z&key=p3&limit=1000&ttl=600');
is($r->{status}, 204, 'raised to 1000 for 600 s');
is($t2->wait_log(qr/key "p3" limit 1000 for 600 s \(was none\)/, 1), 1, 'logged');
my $pttl = $t->redis('PTTL', 'rl:z+:p3');
ok($pttl > 595_000 && $pttl <= 600_000, "the side key lapses with it ($pttl ms)");
sleep 0.1;    # the message reaches the workers as the reply reaches the client
is(first_on_each('p3'), '200 200 200 200', 'every worker admits "p3" at once');
my $json = $t->get('/q?key=p3')->{content};
like($json, qr/"zone":"z","key":"p3","limit":1000,.*"override":1000,"override_ttl":(\d+)/,
    'GET reports the override and its ttl');
my ($ttl) = $json =~ /"override_ttl":(\d+)/;
ok($ttl > 590 && $ttl <= 600, "its ttl in seconds ($ttl)");
like($t->get('/q?key=p1')->{content}, qr/"key":"p1","limit":7,.*"override":7,"override_ttl":-1/,
    'one that never lapses: override_ttl -1');

# A lapsing override: no worker remembers a rejection past it.
is(put($t, 'zone=z&key=p4&limit=1&ttl=2')->{status}, 204, 'limit 1 for 2 s');
ok(all_reject('p4'), 'every worker rejected "p4" under it');
ok(RateLimitTest::wait_until(sub { !$t->redis('EXISTS', 'rl:z+:p4') }, 5),
    'Redis drops the side key on time');
# Its count is 1, the zone's limit 5: 4 of 12 pass, unless some worker
# still answers from its memory of the rejections.
my $passed = 0;
my $lapsed = round('p4', 6);
$passed += grep { $_ == 200 } @$_ for values %$lapsed;
is($passed, 4, 'no worker remembers a rejection past the override: 4 of 12 pass');

# Removed: limit=default.
is(put($t, 'zone=z&key=p1&limit=default')->{status}, 204, 'limit=default: 204');
is($t->redis('EXISTS', 'rl:z+:p1'), 0, 'the side key is gone');
is($t->wait_log(qr/key "p1" override removed \(was 7\) by 127\.0\.0\.1/, 1), 1, 'logged');
is(hdr(ask($t2, 'z', 'p1'), 'X-RateLimit-Limit'), 5, "the zone's limit again");

# A GCRA zone's rate.
is(put($t, 'zone=g&key=p5&rate=600000r/m')->{status}, 204, 'PUT rate=600000r/m: 204');
is(statuses('g', 'p5', 4), '200 200 200 200', 'the GCRA zone takes it');
is($t->wait_log(qr/key "p5" rate 600000r\/m until removed/, 1), 1, 'logged as a rate');
like($t->get('/q?key=p5')->{content}, qr/"zone":"g",.*"override":600000,"override_ttl":-1,"override_rate":"600000r\/m"/,
    'GET reports a GCRA override as a rate');
my $metrics = $t->get('/metrics')->{content};
like($metrics, qr/^nginx_ratelimit_override_changes_total\{zone="z",change="set"\} 4$/m,
    'the metrics count the overrides set through this server (p1, p2, p4, p6)');
like($metrics, qr/^nginx_ratelimit_override_changes_total\{zone="z",change="removed"\} 1$/m,
    'and removed');

# Side values the window script reads no override in, out of its bounds
# (a window of 0; a limit over 2^53), written by hand: a PUT over one
# replaced none, and says so.
$t->redis('SET', 'rl:z+:p7', 'o=9,0,0');
$t->redis('SET', 'rl:z+:p8', 'o=9007199254740994,60000,0');
for my $key ('p7', 'p8') {
    is(hdr(ask($t, 'z', $key), 'X-RateLimit-Limit'), 5, "$key: out of bounds, no override");
    is(put($t, "zone=z&key=$key&limit=3")->{status}, 204, "$key: PUT over it: 204");
    is($t->wait_log(qr/key "$key" limit 3 until removed \(was none\)/, 1), 1,
        "$key: logged as replacing none");
}

# A map's 0 lifted through the API: remembered as rejected on both servers
# first, let through at once.
is(statuses('v', 'p9', 2, 'blocked'), '429 429', "p9's plan is blocked");
is(put($t, 'zone=v&key=p9&limit=2')->{status}, 204, 'p9 given 2 a window');
is(statuses('v', 'p9', 3, 'blocked'), '200 200 429', 'the override lifts the map\'s 0 on both servers');

# Without Redis a limit of 0 still refuses (the fail policy, open here, is
# for Redis's failures).
$t->stop_redis;
is(ask($t, 'v', 'shut2', 'blocked')->{status}, 429, 'Redis down: a map\'s 0 refuses');
is(ask($t, 'v', 'p10')->{status}, 200, 'Redis down: a limit above 0 fails open');

$_->stop_nginx for @SERVERS;
$_->no_alerts for @SERVERS;

done_testing;
