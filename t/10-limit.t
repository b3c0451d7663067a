#!/usr/bin/perl
# Exact limit, headers on 200/404/429, variables, Retry-After honoured, rate units.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use RateLimitTest qw(parse_ratelimit parse_policy hdr);

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 1);
$t->start_redis;

# default redis timeout (50ms) on purpose in this file
$t->write_conf(<<'EOF');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%%;
ratelimit_zone api   key=$http_x_api_key limit=3 window=60s;
ratelimit_zone short key=$http_x_api_key limit=2 window=2s;
ratelimit_zone prx   key=$http_x_api_key limit=1 window=60s;
ratelimit_zone rs    key=$http_x_api_key rate=2r/s;
ratelimit_zone rm    key=$http_x_api_key rate=10r/m;
ratelimit_zone rh    key=$http_x_api_key rate=5r/h;
ratelimit_zone rd    key=$http_x_api_key rate=100r/d;
ratelimit_zone wm    key=$http_x_api_key limit=7 window=1m bucket=1s;
ratelimit_zone wh    key=$http_x_api_key limit=1000000 window=1h;

server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    add_header X-RL-Vars "$ratelimit_limit/$ratelimit_remaining/$ratelimit_reset" always;

    location /api/   { ratelimit zone=api;   alias %%TMP%%/html/; }
    location /short/ { ratelimit zone=short; alias %%TMP%%/html/; }
    location /rs/    { ratelimit zone=rs;    alias %%TMP%%/html/; }
    location /rm/    { ratelimit zone=rm;    alias %%TMP%%/html/; }
    location /rh/    { ratelimit zone=rh;    alias %%TMP%%/html/; }
    location /rd/    { ratelimit zone=rd;    alias %%TMP%%/html/; }
    location /wm/    { ratelimit zone=wm;    alias %%TMP%%/html/; }
    location /wh/    { ratelimit zone=wh;    alias %%TMP%%/html/; }
    location /free/  { alias %%TMP%%/html/; }
    location /prx/   { ratelimit zone=prx; proxy_pass http://127.0.0.1:%%PORT2%%/; }
}

server {
    listen 127.0.0.1:%%PORT2%%;
    location / { root %%TMP%%/html; }
}
EOF
$t->start_nginx;

sub check_headers {
    my ($r, %e) = @_;    # name, q, w, remaining, tmin, tmax
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my $what = $e{what};
    my @pol = parse_policy(hdr($r, 'RateLimit-Policy'));
    is(scalar @pol, 1, "$what: one RateLimit-Policy member")
        or diag('RateLimit-Policy: ' . (hdr($r, 'RateLimit-Policy') // '<none>'));
    is($pol[0]{name}, $e{name}, "$what: policy name");
    is($pol[0]{q}, $e{q}, "$what: policy q");
    is($pol[0]{w}, $e{w}, "$what: policy w");
    my @rl = parse_ratelimit(hdr($r, 'RateLimit'));
    is(scalar @rl, 1, "$what: one RateLimit member")
        or diag('RateLimit: ' . (hdr($r, 'RateLimit') // '<none>'));
    my $rl = $rl[0] // {};
    is($rl->{name}, $e{name}, "$what: RateLimit name");
    is($rl->{r}, $e{remaining}, "$what: RateLimit r");
    my $tt = $rl->{t} // -1;
    ok($tt =~ /^\d+$/ && $tt >= $e{tmin} && $tt <= $e{tmax},
        "$what: RateLimit t=$tt in [$e{tmin}, $e{tmax}]");
    is(hdr($r, 'X-RateLimit-Limit'), $e{q}, "$what: X-RateLimit-Limit");
    is(hdr($r, 'X-RateLimit-Remaining'), $e{remaining}, "$what: X-RateLimit-Remaining");
    my $reset = hdr($r, 'X-RateLimit-Reset') // '';
    my $now = time;
    ok($reset =~ /^\d+$/ && abs($reset - ($now + $tt)) <= 2,
        "$what: X-RateLimit-Reset ($reset) = now + t (" . int($now + $tt) . ")");
    is(hdr($r, 'X-RL-Vars'), "$e{q}/$e{remaining}/$reset", "$what: \$ratelimit_limit/remaining/reset");
    return $rl;
}

# --- exact limit, headers on every response ----------------------------------

my @st;
for my $i (1 .. 3) {
    my $r = $t->get('/api/index.html', { 'X-Api-Key' => 'k1' });
    is($r->{status}, 200, "k1 request $i: 200");
    is($r->{content}, "index page\n", "k1 request $i: content") if $i == 1;
    is(hdr($r, 'X-RL-Status'), 'PASSED', "k1 request $i: \$ratelimit_status PASSED");
    check_headers($r, what => "k1 request $i", name => 'api', q => 3, w => 60,
        remaining => 3 - $i, tmin => 55, tmax => 60);
    ok(!defined hdr($r, 'Retry-After'), "k1 request $i: no Retry-After on 200");
}

for my $i (4 .. 5) {
    my $r = $t->get('/api/index.html', { 'X-Api-Key' => 'k1' });
    is($r->{status}, 429, "k1 request $i: 429");
    ok(length($r->{content}) > 0 && length($r->{content}) < 4096, "k1 request $i: short body");
    unlike($r->{content}, qr/index page/, "k1 request $i: not the file");
    is(hdr($r, 'X-RL-Status'), 'REJECTED', "k1 request $i: \$ratelimit_status REJECTED");
    my $rl = check_headers($r, what => "k1 request $i (429)", name => 'api', q => 3, w => 60,
        remaining => 0, tmin => 55, tmax => 60);
    my $ra = hdr($r, 'Retry-After');
    ok(defined $ra && $ra =~ /^\d+$/ && $ra >= 1, "k1 request $i: Retry-After >= 1");
    is($ra, $rl->{t}, "k1 request $i: Retry-After equals t") if defined $rl->{t} && $rl->{t} >= 1;
}

# other subject is independent
{
    my $r = $t->get('/api/a.html', { 'X-Api-Key' => 'k2' });
    is($r->{status}, 200, 'k2: 200 while k1 is limited');
    is($r->{content}, "page a\n", 'k2: content');
    check_headers($r, what => 'k2', name => 'api', q => 3, w => 60, remaining => 2, tmin => 55, tmax => 60);
}

# 404 from a limited location: counted, headers present
{
    my $r = $t->get('/api/missing.html', { 'X-Api-Key' => 'k404' });
    is($r->{status}, 404, 'missing file: 404');
    check_headers($r, what => '404', name => 'api', q => 3, w => 60, remaining => 2, tmin => 55, tmax => 60);
}

# redis state: rejected requests are not counted
is($t->redis('TYPE', 'rl:api:k1'), 'string', 'rl:api:k1 is a string (the default layout, packed)');
is($t->redis_window_total('rl:api:k1'), 3, 'rl:api:k1 counts 3 (rejections not counted)');
is($t->redis_window_total('rl:api:k2'), 1, 'rl:api:k2 counts 1');

# one log line per rejection, at [error] by default
is($t->wait_log(qr/limiting requests by zone "api"/, 2), 2, 'two "limiting requests" lines');
is($t->count_log(qr/\[error\].*limiting requests by zone "api", key "k1"/), 2,
    'logged at [error] with zone and key');

# access log variables
{
    my @e = $t->access_entries_for('/api/index.html', 5);
    is(scalar @e, 5, 'five access log entries for k1');
    is(join(',', map { $_->{rs} } @e), 'PASSED,PASSED,PASSED,REJECTED,REJECTED', '$ratelimit_status in access log');
    is(join(',', map { $_->{lim} } @e), '3,3,3,3,3', '$ratelimit_limit in access log');
    is(join(',', map { $_->{rem} } @e), '2,1,0,0,0', '$ratelimit_remaining in access log');
    ok(!(grep { $_->{reset} !~ /^\d+$/ || abs($_->{reset} - time - 60) > 7 } @e), '$ratelimit_reset ~ now + 60')
        or diag(join ' ', map { $_->{reset} } @e);
}

# --- location without ratelimit: no headers, empty variables ----------------

{
    my $r = $t->get('/free/index.html', { 'X-Api-Key' => 'k1' });
    is($r->{status}, 200, 'unlimited location: 200');
    ok(!defined hdr($r, 'RateLimit') && !defined hdr($r, 'RateLimit-Policy')
        && !defined hdr($r, 'X-RateLimit-Limit') && !defined hdr($r, 'X-RateLimit-Remaining')
        && !defined hdr($r, 'X-RateLimit-Reset'), 'unlimited location: no RateLimit headers');
    ok(!defined hdr($r, 'X-RL-Status'), 'unlimited location: $ratelimit_status empty');
    my ($e) = $t->access_entries_for('/free/index.html', 1);
    # an unset (not found) variable is logged as "-" by nginx
    ok($e && !(grep { $e->{$_} ne '' && $e->{$_} ne '-' } qw(rs lim rem reset)),
        'unlimited location: all variables empty in access log')
        or diag(explain $e);
}

# --- proxied location -------------------------------------------------------

{
    my $r = $t->get('/prx/b.html', { 'X-Api-Key' => 'p1' });
    is($r->{status}, 200, 'proxied: 200');
    is($r->{content}, "page b\n", 'proxied: content');
    check_headers($r, what => 'proxied 200', name => 'prx', q => 1, w => 60, remaining => 0, tmin => 55, tmax => 60);
    $r = $t->get('/prx/b.html', { 'X-Api-Key' => 'p1' });
    is($r->{status}, 429, 'proxied: second request 429');
    check_headers($r, what => 'proxied 429', name => 'prx', q => 1, w => 60, remaining => 0, tmin => 55, tmax => 60);
}

# --- rate units -------------------------------------------------------------

for my $c (['rs', 2, 1], ['rm', 10, 60], ['rh', 5, 3600], ['rd', 100, 86400],
    ['wm', 7, 60], ['wh', 1000000, 3600])
{
    my ($zone, $q, $w) = @$c;
    my $r = $t->get("/$zone/index.html", { 'X-Api-Key' => "u-$zone" });
    is($r->{status}, 200, "$zone: 200");
    my ($p) = parse_policy(hdr($r, 'RateLimit-Policy'));
    is($p && "$p->{name};q=$p->{q};w=$p->{w}", "$zone;q=$q;w=$w", "$zone: policy q=$q w=$w")
        or diag(hdr($r, 'RateLimit-Policy'));
    is(hdr($r, 'RateLimit-Policy'), qq{"$zone";q=$q;w=$w}, "$zone: exact RateLimit-Policy format");
    is(hdr($r, 'X-RateLimit-Remaining'), $q - 1, "$zone: remaining " . ($q - 1));
}

# rate=2r/s really admits 2 per second
{
    my @s = map { $t->get('/rs/index.html', { 'X-Api-Key' => 'u-rs2' })->{status} } 1 .. 3;
    is("@s", '200 200 429', 'rate=2r/s: third request within the second rejected');
}

# --- Retry-After honoured ---------------------------------------------------

{
    my @s = map { $t->get('/short/index.html', { 'X-Api-Key' => 'k3' })->{status} } 1 .. 2;
    is("@s", '200 200', 'short: 2 admitted');
    my $r = $t->get('/short/index.html', { 'X-Api-Key' => 'k3' });
    is($r->{status}, 429, 'short: third rejected');
    my $ra = hdr($r, 'Retry-After') // 0;
    ok($ra >= 1 && $ra <= 2, "short: Retry-After ($ra) in [1,2]");
    my ($rl) = parse_ratelimit(hdr($r, 'RateLimit'));
    ok($rl && $rl->{t} >= 1 && $rl->{t} <= 2, 'short: t in [1,2]');
    is($t->get('/short/index.html', { 'X-Api-Key' => 'k3' })->{status}, 429, 'short: still rejected immediately');
    sleep($ra + 0.15);
    $r = $t->get('/short/index.html', { 'X-Api-Key' => 'k3' });
    is($r->{status}, 200, "short: admitted after waiting Retry-After ($ra s)");
}

$t->stop_nginx;
$t->no_alerts;

done_testing;
