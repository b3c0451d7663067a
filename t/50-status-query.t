#!/usr/bin/perl
# Status API: ratelimit_query answers GET ?key=... / ?key_hex=... with a JSON
# array (one object per configured zone, in order), counting nothing.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use JSON::PP ();
use RateLimitTest qw(hdr);
use FaultTest ();

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 1);
$t->start_redis;
$t->write_conf(<<'EOF');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=1s;
ratelimit_zone api   key=$http_x_api_key limit=10 window=60s;
ratelimit_zone login key=$http_x_api_key limit=3 window=10s;
ratelimit_zone bin   key=$binary_remote_addr limit=5 window=60s;

server {
    listen 127.0.0.1:%%PORT%%;
    location /api/   { ratelimit zone=api;   alias %%TMP%%/html/; }
    location /login/ { ratelimit zone=login; alias %%TMP%%/html/; }
    location /bin/   { ratelimit zone=bin;   alias %%TMP%%/html/; }

    location = /ratelimit { ratelimit_query zone=api zone=login; }
    location = /rev       { ratelimit_query zone=login zone=api; }
    location = /one       { ratelimit_query zone=login; }
    location = /rl-bin    { ratelimit_query zone=bin; }
}
EOF
$t->start_nginx;

my $JSON = JSON::PP->new->utf8;
my @FIELDS = sort qw(zone key limit used remaining window reset retry_after);

sub pct { my ($s) = @_; $s =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord $1)/ge; return $s }

# GET a status URL; returns ($response, $decoded_json_or_undef)
sub sq {
    my ($uri) = @_;
    my $r = $t->get($uri);
    my $j = eval { $JSON->decode($r->{content}) };
    $r->{json_error} = $@ unless defined $j;
    return ($r, $j);
}

sub qkey { my ($key, $loc) = @_; return sq('/' . ($loc // 'ratelimit') . '?key=' . pct($key)) }

# checks one report object; %e: zone key limit used remaining window
sub check_obj {
    my ($what, $o, %e) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    ok(ref $o eq 'HASH', "$what: object") or return;
    is(join(',', sort keys %$o), join(',', @FIELDS), "$what: fields");
    for my $f (qw(zone key limit used remaining window)) {
        is($o->{$f}, $e{$f}, "$what: $f = " . (defined $e{$f} ? $e{$f} : 'undef')) if exists $e{$f};
    }
    for my $f (qw(limit used remaining window reset retry_after)) {
        ok(defined $o->{$f} && $o->{$f} =~ /^\d+$/, "$what: $f is a non-negative integer");
    }
}

# checks status/content type/array shape
sub check_ok {
    my ($what, $r, $j, $n) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is($r->{status}, 200, "$what: 200");
    like(hdr($r, 'Content-Type') // '', qr{^application/json\b}, "$what: Content-Type application/json");
    ok(ref $j eq 'ARRAY', "$what: body is a JSON array") or diag($r->{content});
    is(ref $j eq 'ARRAY' ? scalar @$j : -1, $n, "$what: $n object(s)");
}

sub check_error {
    my ($what, $uri, $status) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my ($r, $j) = sq($uri);
    is($r->{status}, $status, "$what: $status");
    like(hdr($r, 'Content-Type') // '', qr{^application/json\b}, "$what: Content-Type application/json");
    ok(ref $j eq 'HASH' && defined $j->{error} && !ref $j->{error} && length $j->{error},
        "$what: JSON body {\"error\":\"...\"}") or diag($r->{content});
    return $j;
}

# warm up the connection to redis
$t->get_as('api', 'warmup');

# --- unknown key ---------------------------------------------------------------

{
    my $now = time;
    my ($r, $j) = qkey('nobody');
    check_ok('unknown key', $r, $j, 2);
    check_obj('unknown key, zone 1', $j->[0], zone => 'api', key => 'nobody', limit => 10, used => 0,
        remaining => 10, window => 60);
    check_obj('unknown key, zone 2', $j->[1], zone => 'login', key => 'nobody', limit => 3, used => 0,
        remaining => 3, window => 10);
    for my $o (@$j) {
        is($o->{retry_after}, 0, "unknown key, $o->{zone}: retry_after 0");
        ok($o->{reset} >= int($now) - 1 && $o->{reset} <= $now + 2,
            "unknown key, $o->{zone}: reset ($o->{reset}) ~ now (" . int($now) . ')');
    }
    # raw text: numbers are JSON numbers, not strings
    like($r->{content}, qr/"limit":10\b/, 'unknown key: "limit":10 is a number');
    like($r->{content}, qr/^\[\{"zone":"api",/, 'unknown key: array starts with the first zone');

    ($r, $j) = qkey('nobody', 'rev');
    check_ok('zone order', $r, $j, 2);
    is(join(',', map { $_->{zone} } @$j), 'login,api', 'zones reported in configured order');
    ($r, $j) = qkey('nobody', 'one');
    check_ok('one zone', $r, $j, 1);
    is($j->[0]{zone}, 'login', 'one zone: login');
}

# --- counts after requests --------------------------------------------------------

{
    my $t0 = time;
    my @s = map { $t->get_as('api', 'k1')->{status} } 1 .. 7;
    is("@s", '200 200 200 200 200 200 200', 'k1: 7 requests to /api/ pass');
    my $now = time;
    my ($r, $j) = qkey('k1');
    check_ok('k1', $r, $j, 2);
    check_obj('k1 api', $j->[0], zone => 'api', key => 'k1', limit => 10, used => 7, remaining => 3, window => 60);
    is($j->[0]{retry_after}, 0, 'k1 api: retry_after 0 (remaining > 0)');
    ok($j->[0]{reset} >= $t0 + 58 && $j->[0]{reset} <= $now + 62,
        "k1 api: reset ($j->[0]{reset}) ~ first request + 60 s (" . int($t0 + 60) . ')');
    check_obj('k1 login', $j->[1], zone => 'login', key => 'k1', limit => 3, used => 0, remaining => 3,
        window => 10);
}

{
    my $t0 = time;
    my @s = map { $t->get_as('login', 'k2')->{status} } 1 .. 4;
    is("@s", '200 200 200 429', 'k2: login limit reached');
    my $now = time;
    my ($r, $j) = qkey('k2');
    check_ok('k2', $r, $j, 2);
    check_obj('k2 api', $j->[0], zone => 'api', key => 'k2', used => 0, remaining => 10);
    check_obj('k2 login', $j->[1], zone => 'login', key => 'k2', limit => 3, used => 3, remaining => 0,
        window => 10);
    my $o = $j->[1];
    ok($o->{retry_after} >= 1 && $o->{retry_after} <= 10, "k2 login: retry_after ($o->{retry_after}) in [1,10]");
    ok($o->{reset} >= $t0 + 8 && $o->{reset} <= $now + 11,
        "k2 login: reset ($o->{reset}) ~ first request + 10 s (" . int($t0 + 10) . ')');
    ok(abs($o->{reset} - ($now + $o->{retry_after})) <= 2,
        "k2 login: reset ~ now + retry_after");
    my $rj = $t->get_as('login', 'k2');
    is($rj->{status}, 429, 'k2: still rejected after the query');
    my $ra = hdr($rj, 'Retry-After') // -99;
    ok(abs($ra - $o->{retry_after}) <= 1, "k2: query retry_after ($o->{retry_after}) ~ Retry-After ($ra)");
}

# --- querying counts nothing ---------------------------------------------------------

{
    for (1 .. 20) { qkey('k3') }
    my @st = map { (sq('/one?key_hex=6b33'))[0]{status} } 1 .. 5;
    is("@st", '200 200 200 200 200', 'key_hex queries: 200');
    my ($r, $j) = qkey('k3');
    is($j && $j->[0]{used}, 0, 'after 26 queries: api used 0');
    is($j && $j->[1]{used}, 0, 'after 26 queries: login used 0');
    my @s = map { $t->get_as('login', 'k3')->{status} } 1 .. 4;
    is("@s", '200 200 200 429', 'after 26 queries: the full login limit (3) is still available');
    @s = map { $t->get_as('api', 'k3')->{status} } 1 .. 11;
    is("@s", join(' ', ('200') x 10, '429'), 'after 26 queries: the full api limit (10) is still available');
    ($r, $j) = qkey('k3');
    is($j && "$j->[0]{used}/$j->[1]{used}", '10/3', 'k3: used 10 and 3 (rejections and queries not counted)');
}

# --- percent-encoded keys and key_hex -------------------------------------------------

{
    my $key = 'a b/c?d&e=f%+#x';
    my @s = map { $t->get_as('api', $key)->{status} } 1 .. 2;
    is("@s", '200 200', 'odd key: 2 requests pass');
    my ($r, $j) = qkey($key);
    check_ok('percent-encoded key', $r, $j, 2);
    check_obj('percent-encoded key', $j->[0], key => $key, used => 2, remaining => 8);

    ($r, $j) = sq('/ratelimit?key_hex=' . unpack('H*', $key));
    check_ok('key_hex (lower case)', $r, $j, 2);
    check_obj('key_hex', $j->[0], key => $key, used => 2, remaining => 8);

    ($r, $j) = sq('/ratelimit?key_hex=' . uc unpack('H*', $key));
    check_ok('key_hex (upper case)', $r, $j, 2);
    is($j && $j->[0]{used}, 2, 'key_hex upper case: used 2');

    # other query arguments around the key
    ($r, $j) = sq('/ratelimit?x=1&key=k1&y=2');
    is($j && $j->[0]{key} . '/' . $j->[0]{used}, 'k1/7', 'key among other arguments');
}

# --- binary subjects ----------------------------------------------------------------

{
    my @s = map { $t->get_as('bin', 'whatever')->{status} } 1 .. 3;
    is("@s", '200 200 200', 'binary_remote_addr zone: 3 requests pass');
    my ($r, $j) = sq('/rl-bin?key_hex=7f000001');
    check_ok('key_hex=7f000001', $r, $j, 1);
    check_obj('key_hex=7f000001', $j->[0], zone => 'bin', key => "\x7f\x00\x00\x01", limit => 5, used => 3,
        remaining => 2, window => 60);
    like($r->{content}, qr/"key":"(?:\\u007[fF]|\x7f)\\u0000\\u0000\\u0001"/, 'binary key escaped in JSON')
        or diag($r->{content});
    ($r, $j) = sq('/rl-bin?key_hex=7F000001');
    is($j && $j->[0]{used}, 3, 'key_hex=7F000001 (upper case): used 3');
    ($r, $j) = sq('/rl-bin?key_hex=7f000002');
    is($j && $j->[0]{used}, 0, 'key_hex=7f000002: used 0');
}

# --- JSON escaping of arbitrary bytes --------------------------------------------------

{
    # every byte value: none of 0x80..0xff forms valid UTF-8 in this order
    my $all = join '', map { chr } 0 .. 255;
    my ($r, $j) = sq('/one?key_hex=' . unpack('H*', $all));
    check_ok('all 256 bytes', $r, $j, 1);
    ok(defined $j, 'all 256 bytes: body is valid JSON (strict UTF-8)') or diag($r->{json_error});
    is($j && $j->[0]{key}, $all, 'all 256 bytes: key decodes to U+0000..U+00FF (invalid bytes as \u00XX)');
    like($r->{content}, qr/\\u00[fF][fF]/, 'all 256 bytes: 0xff escaped as \u00ff');
    like($r->{content}, qr/\\u0000/, 'all 256 bytes: NUL escaped as \u0000');
    like($r->{content}, qr/\\"/, 'all 256 bytes: quote escaped');
    like($r->{content}, qr/\\\\/, 'all 256 bytes: backslash escaped');
    unlike($r->{content}, qr/[\x00-\x1f\x80-\xff]/, 'all 256 bytes: no raw control or high bytes');
    is($j && $j->[0]{used}, 0, 'all 256 bytes: used 0');

    # a non-UTF-8 subject sent in a header, then queried
    my $bad = "x\xff\xfe\x01y";
    # (over a raw socket: HTTP::Tiny refuses header values with such bytes)
    my $sent = FaultTest::raw_get($t->port('PORT'), '/login/index.html', ["X-Api-Key: $bad"]);
    is($sent->{status}, 200, 'non-UTF-8 subject: request passes (sent over a raw socket)')
        or diag("$sent->{err} $sent->{body}");
    ($r, $j) = sq('/one?key_hex=' . unpack('H*', $bad));
    check_ok('non-UTF-8 subject', $r, $j, 1);
    is($j && $j->[0]{key}, "x\x{ff}\x{fe}\x{01}y", 'non-UTF-8 subject: key with \u00XX escapes');
    like($r->{content}, qr/"key":"x\\u00[fF][fF]\\u00[fF][eE]\\u0001y"/, 'non-UTF-8 subject: raw escapes')
        or diag($r->{content});
    is($j && $j->[0]{used}, 1, 'non-UTF-8 subject: used 1');

    # valid UTF-8 is kept as the characters it encodes
    my $utf8 = "caf\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x98\x80";
    ($r, $j) = sq('/one?key=' . pct($utf8));
    check_ok('UTF-8 key', $r, $j, 1);
    is($j && $j->[0]{key}, "caf\x{e9}-\x{20ac}-\x{1f600}", 'UTF-8 key: decodes to the same characters');

    # a truncated sequence and an overlong encoding are not valid UTF-8
    ($r, $j) = sq('/one?key_hex=' . unpack('H*', "a\xc3"));
    ok(defined $j, 'truncated UTF-8 sequence: valid JSON') or diag($r->{content});
    is($j && $j->[0]{key}, "a\x{c3}", 'truncated UTF-8 sequence: escaped as \u00c3');
    ($r, $j) = sq('/one?key_hex=' . unpack('H*', "\xc0\xaf"));
    ok(defined $j, 'overlong encoding: valid JSON') or diag($r->{content});
    is($j && $j->[0]{key}, "\x{c0}\x{af}", 'overlong encoding: both bytes escaped');
    ($r, $j) = sq('/one?key_hex=' . unpack('H*', "\xed\xa0\x80"));
    ok(defined $j, 'UTF-8 encoded surrogate: valid JSON') or diag($r->{content});
    is($j && $j->[0]{key}, "\x{ed}\x{a0}\x{80}", 'UTF-8 encoded surrogate: bytes escaped');
}

# --- bad requests --------------------------------------------------------------------

check_error('no key argument', '/ratelimit', 400);
check_error('other arguments only', '/ratelimit?foo=bar', 400);
check_error('empty key', '/ratelimit?key=', 400);
check_error('empty key_hex', '/ratelimit?key_hex=', 400);
check_error('odd-length key_hex', '/ratelimit?key_hex=abc', 400);
check_error('non-hex key_hex', '/ratelimit?key_hex=zz', 400);
check_error('non-hex digit in key_hex', '/ratelimit?key_hex=7f0g', 400);

# still nothing counted by any of this
{
    my ($r, $j) = qkey('k2');
    is($j && "$j->[0]{used}/$j->[1]{used}", '0/3', 'k2 unchanged by queries and errors');
}

# --- redis down ------------------------------------------------------------------------

$t->stop_redis;
{
    my $t0 = time;
    my $j = check_error('redis down', '/ratelimit?key=k1', 503);
    is($j && $j->{error}, 'redis unavailable', 'redis down: {"error":"redis unavailable"}');
    ok(time - $t0 < 3, 'redis down: answered quickly');
    $j = check_error('redis down, key_hex', '/rl-bin?key_hex=7f000001', 503);
    is($j && $j->{error}, 'redis unavailable', 'redis down, key_hex: {"error":"redis unavailable"}');
    # a bad request is still a 400
    check_error('redis down, missing key', '/ratelimit', 400);
}

# the API comes back with redis (counts are gone: a new, empty redis)
$t->start_redis(port => $t->redis_port);
{
    my $deadline = time + 6;
    my ($r, $j);
    while (1) {
        ($r, $j) = qkey('k1');
        last if $r->{status} == 200 || time > $deadline;
        sleep 0.2;
    }
    check_ok('redis back', $r, $j, 2);
    is($j && $j->[0]{used}, 0, 'redis back: used 0 (fresh redis)');
}

$t->stop_nginx;

# nothing listening on the configured redis port at all
$t->write_conf(<<'EOF');
ratelimit_redis 127.0.0.1:%%DEAD_PORT%% timeout=1s connect_timeout=1s;
ratelimit_zone api key=$http_x_api_key limit=10 window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    location = /ratelimit { ratelimit_query zone=api; }
}
EOF
$t->start_nginx;
{
    my $j = check_error('no redis listening', '/ratelimit?key=k1', 503);
    is($j && $j->{error}, 'redis unavailable', 'no redis listening: {"error":"redis unavailable"}');
}
$t->stop_nginx;

$t->no_alerts;

done_testing;
