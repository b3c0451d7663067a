#!/usr/bin/perl
# A subject's own limit (issue 41), read from its side key in the call that
# decides it.  Two nginx servers of two workers each, one Redis, whose
# configuration has `ratelimit_query ... override=on`: every rate zone
# reads its subjects' overrides.  The side keys and markers are written
# here with Redis commands, as the status API's PUT will write them
# (docs/operations.md "Redis data layout"), once through the window script
# and once through the Redis module's command.
#
# Expected: an override "o=L,W,X" in force (X = 0, or X later than Redis's
# time in ms) in the side key "rl:ZONE+:SUBJECT" applies while the zone's
# marker "rl:ZONE+" exists: a window zone admits L a window, a GCRA zone
# takes L per W ms, a zone whose limit is a variable takes L too; on both
# servers; X-RateLimit-Limit and RateLimit-Policy say L.  L = 0 answers
# 429 with Retry-After until X.  Without the marker, lapsed, or malformed:
# the zone's own limit.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use RateLimitTest qw(hdr);

RateLimitTest::require_module();
my $SO = RateLimitTest::redis_module_so() or BAIL_OUT('redis module not built');

my $t  = RateLimitTest->new(workers => 2);
my $t2 = RateLimitTest->new(workers => 2);
my $REDIS_PORT = $t->redis_port;

my $conf = <<"EOF" . <<'EOF';
ratelimit_redis 127.0.0.1:$REDIS_PORT timeout=2s;
EOF
map $http_x_plan $plan_limit { default 3; big 50; }
ratelimit_zone z key=$http_x_api_key limit=5 window=60s;
ratelimit_zone g key=$http_x_api_key rate=1r/m algorithm=gcra;
ratelimit_zone v key=$http_x_api_key limit=$plan_limit window=60s;
server {
    listen 127.0.0.1:%%PORT%% reuseport;
    location /z/ { ratelimit zone=z; alias %%TMP%%/html/; }
    location /g/ { ratelimit zone=g; alias %%TMP%%/html/; }
    location /v/ { ratelimit zone=v; alias %%TMP%%/html/; }
    location = /q { ratelimit_query zone=z zone=g zone=v override=on; }
}
EOF
$t->write_conf($conf);
$t2->write_conf($conf);
my @SERVERS = ($t, $t2);

sub ask {
    my ($srv, $loc, $key) = @_;
    return $srv->get("/$loc/index.html", { 'X-Api-Key' => $key });
}

# The statuses of $n requests of $key in $loc, alternating servers.
sub statuses {
    my ($loc, $key, $n) = @_;
    return join ' ', map { ask($SERVERS[$_ % 2], $loc, $key)->{status} } 0 .. $n - 1;
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

    if ($module) {
        my $stats = $t->redis('INFO', 'commandstats');
        like($stats, qr/cmdstat_ratelimit\.decide:calls=\d+/, 'the Redis module decided');
        unlike($stats, qr/cmdstat_evalsha/, 'not the script');
    }

    $_->stop_nginx for @SERVERS;
    $_->no_alerts for @SERVERS;
    $t->stop_redis;
}

done_testing;
