#!/usr/bin/perl
# Several zones, inheritance, empty key, binary key, long keys, prefix.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use RateLimitTest qw(parse_ratelimit parse_policy hdr);

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 1);
$t->start_redis;

my $ZONES = <<'EOF';
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=1s;
ratelimit_zone a    key=$http_x_api_key limit=3 window=60s;
ratelimit_zone b    key=$http_x_user limit=5 window=60s;
ratelimit_zone c    key=$http_x_api_key limit=2 window=60s;
ratelimit_zone ip   key=$binary_remote_addr limit=100 window=60s;
ratelimit_zone long key=$http_x_api_key limit=2 window=60s;
EOF

my $SERVERS = <<'EOF';
ratelimit zone=c;

server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    ratelimit zone=a;

    location /inh/  { alias %%TMP%%/html/; }
    location /own/  { ratelimit zone=b; alias %%TMP%%/html/; }
    location /two/  { ratelimit zone=a; ratelimit zone=b; alias %%TMP%%/html/; }
    location /rev/  { ratelimit zone=b; ratelimit zone=a; alias %%TMP%%/html/; }
    location /ip/   { ratelimit zone=ip; alias %%TMP%%/html/; }
    location /long/ { ratelimit zone=long; alias %%TMP%%/html/; }
}

server {
    listen 127.0.0.1:%%PORT2%%;
    add_header X-RL-Status "$ratelimit_status" always;
    location / { root %%TMP%%/html; }
}
EOF

$t->write_conf($ZONES . $SERVERS);
$t->start_nginx;

sub get {
    my ($path, %h) = @_;
    my $port = delete $h{port};
    return $t->get($path, \%h, $port ? (port => $port) : ());
}
sub policy_str {
    my ($r) = @_;
    return join ', ', map { "$_->{name};q=$_->{q};w=$_->{w}" } parse_policy(hdr($r, 'RateLimit-Policy'));
}
sub rl_str {
    my ($r) = @_;
    return join ', ', map { "$_->{name};r=$_->{r}" } parse_ratelimit(hdr($r, 'RateLimit'));
}

# --- two zones on one location ---------------------------------------------

{
    my %h = ('X-Api-Key' => 'k1', 'X-User' => 'u1');
    my $r = get('/two/index.html', %h);
    is($r->{status}, 200, 'two zones: 1st 200');
    is(policy_str($r), 'a;q=3;w=60, b;q=5;w=60', 'two zones: RateLimit-Policy lists both in order');
    is(hdr($r, 'RateLimit-Policy'), '"a";q=3;w=60, "b";q=5;w=60', 'two zones: exact policy header')
        or diag(hdr($r, 'RateLimit-Policy'));
    is(rl_str($r), 'a;r=2', 'two zones: RateLimit names the zone closest to its limit (a)');
    is(hdr($r, 'X-RateLimit-Limit'), 3, 'two zones: X-RateLimit-Limit of zone a');
    is(hdr($r, 'X-RateLimit-Remaining'), 2, 'two zones: X-RateLimit-Remaining of zone a');

    get('/two/index.html', %h) for 1 .. 2;
    $r = get('/two/index.html', %h);
    is($r->{status}, 429, 'two zones: 4th rejected by a');
    is(rl_str($r), 'a;r=0', 'two zones: 429 names zone a');
    is(hdr($r, 'X-RL-Status'), 'REJECTED', 'two zones: REJECTED');
    is($t->redis_window_total('rl:a:k1'), 3, 'zone a counted 3');
    is($t->redis_window_total('rl:b:u1'), 3, 'zone b counted 3 (request rejected by a not counted in b)');

    %h = ('X-Api-Key' => 'k2', 'X-User' => 'u1');
    $r = get('/two/index.html', %h);
    is($r->{status}, 200, 'two zones, new key k2: 200');
    is(rl_str($r), 'b;r=1', 'two zones: now zone b is closest (b r=1, a r=2)');
    is(hdr($r, 'X-RateLimit-Limit'), 5, 'two zones: X-RateLimit-Limit of zone b');
    $r = get('/two/index.html', %h);
    is($r->{status}, 200, 'two zones, k2: 2nd 200');
    is(rl_str($r), 'b;r=0', 'two zones: b r=0');
    $r = get('/two/index.html', %h);
    is($r->{status}, 429, 'two zones, k2: rejected by b');
    is(rl_str($r), 'b;r=0', 'two zones: 429 names zone b');
    is(hdr($r, 'X-RateLimit-Remaining'), 0, 'two zones: remaining 0');
    is($t->redis_window_total('rl:a:k2'), 2, 'zone a counted 2 for k2 (request rejected by b not counted in a)');
    is($t->redis_window_total('rl:b:u1'), 5, 'zone b counted 5');

    $r = get('/rev/index.html', 'X-Api-Key' => 'k3', 'X-User' => 'u3');
    is($r->{status}, 200, 'reversed order: 200');
    is(policy_str($r), 'b;q=5;w=60, a;q=3;w=60', 'reversed order: policy follows directive order');
}

# --- inheritance --------------------------------------------------------------

{
    my $r = get('/inh/index.html', 'X-Api-Key' => 'k10', 'X-User' => 'u10');
    is($r->{status}, 200, 'inherited: 200');
    is(policy_str($r), 'a;q=3;w=60', 'location without ratelimit inherits server zone a');
    $r = get('/own/index.html', 'X-Api-Key' => 'k10', 'X-User' => 'u10');
    is(policy_str($r), 'b;q=5;w=60', 'location with its own ratelimit uses only zone b');
    is($t->redis_window_total('rl:a:k10'), 1, 'zone a not applied in /own/');
    my @s = map { get('/inh/index.html', 'X-Api-Key' => 'k10')->{status} } 1 .. 3;
    is("@s", '200 200 429', 'inherited zone a enforces its limit');

    # http-level ratelimit inherited by a server without its own
    $r = get('/index.html', 'X-Api-Key' => 'kc', port => $t->port('PORT2'));
    is($r->{status}, 200, 'http-level: 200');
    is(policy_str($r), 'c;q=2;w=60', 'http-level zone c applies to a server without ratelimit');
    @s = map { get('/index.html', 'X-Api-Key' => 'kc', port => $t->port('PORT2'))->{status} } 1 .. 2;
    is("@s", '200 429', 'http-level zone c enforces its limit');
    is($t->redis('EXISTS', 'rl:c:k10'), 0, 'zone c not applied in the server with its own ratelimit');
}

# --- empty key: not limited ---------------------------------------------------

{
    my @r = map { get('/inh/index.html') } 1 .. 6;
    is(join(' ', map { $_->{status} } @r), '200 200 200 200 200 200', 'empty key: never limited');
    ok(!(grep { defined hdr($_, 'RateLimit') || defined hdr($_, 'RateLimit-Policy')
            || defined hdr($_, 'X-RateLimit-Limit') || defined hdr($_, 'X-RateLimit-Remaining')
            || defined hdr($_, 'X-RateLimit-Reset') } @r), 'empty key: no rate limit headers');
    ok(!(grep { defined hdr($_, 'X-RL-Status') } @r), 'empty key: $ratelimit_status empty');
    is($t->redis('EXISTS', 'rl:a:'), 0, 'empty key: no redis key rl:a:');
    my @empty = $t->access_entries_for(sub {
        my $e = $_;    # unset variables are logged as "-"
        $e->{uri} eq '/inh/index.html' && !grep { $e->{$_} ne '' && $e->{$_} ne '-' } qw(rs lim rem reset)
    }, 6);
    is(scalar @empty, 6, 'empty key: variables empty in access log');

    # two zones, one key empty: only the other zone applies
    my $r = get('/two/index.html', 'X-User' => 'u20');
    is($r->{status}, 200, 'one of two keys empty: 200');
    is(policy_str($r), 'b;q=5;w=60', 'one of two keys empty: only zone b applied');
    is(rl_str($r), 'b;r=4', 'one of two keys empty: RateLimit from zone b');
}

# --- binary key ----------------------------------------------------------------

{
    my $r = get('/ip/index.html');
    is($r->{status}, 200, 'binary key: 200');
    is(hdr($r, 'X-RateLimit-Remaining'), 99, 'binary key: remaining 99');
    is($t->redis('EXISTS', "rl:ip:\x7f\x00\x00\x01"), 1, 'binary key: redis key rl:ip:\\x7f\\x00\\x00\\x01');
    is($t->redis_window_total("rl:ip:\x7f\x00\x00\x01"), 1, 'binary key: counted 1');
    get('/ip/index.html');
    is($t->redis_window_total("rl:ip:\x7f\x00\x00\x01"), 2, 'binary key: counted 2');
    my @k = $t->redis_keys('rl:ip:*');
    is(scalar @k, 1, 'binary key: a single key for the zone');
}

# --- long subjects are hashed, 256 bytes are not -------------------------------

{
    my $k256 = 'y' x 256;
    my $r = get('/long/index.html', 'X-Api-Key' => $k256);
    is($r->{status}, 200, '256-byte key: 200');
    is($t->redis('EXISTS', "rl:long:$k256"), 1, '256-byte subject stored raw');

    my $la = ('x' x 299) . 'a';
    my $lb = ('x' x 299) . 'b';
    my @s = map { get('/long/index.html', 'X-Api-Key' => $la)->{status} } 1 .. 3;
    is("@s", '200 200 429', '300-byte key: limited');
    # the spec only says long subjects are hashed into a short key; the exact
    # form of the hashed key (separator) is not fixed, so look for rl:long*
    my @keys = grep { $_ ne "rl:long:$k256" } $t->redis_keys('rl:long*');
    is(scalar @keys, 1, '300-byte key: one redis key');
    ok(@keys && length($keys[0]) < 128, '300-byte key: redis key is short (hashed), length '
        . (@keys ? length($keys[0]) : '-'));
    ok(@keys && index($keys[0], 'rl:') == 0, '300-byte key: keeps the rl: prefix');
    ok(@keys && index($keys[0], 'x' x 32) < 0, '300-byte key: raw subject not in the redis key');
    is(@keys && $t->redis_window_total($keys[0]), 2, '300-byte key: counted 2 under the hashed key');
    $r = get('/long/index.html', 'X-Api-Key' => $lb);
    is($r->{status}, 200, 'different 300-byte key (same 299-byte prefix): separate counter');
    is(hdr($r, 'X-RateLimit-Remaining'), 1, 'different 300-byte key: remaining 1');
    @keys = grep { $_ ne "rl:long:$k256" } $t->redis_keys('rl:long*');
    is(scalar @keys, 2, 'two long keys -> two redis keys');
}

# --- prefix ---------------------------------------------------------------------

$t->stop_nginx;
$t->write_conf("ratelimit_prefix myapp;\n" . $ZONES . $SERVERS);
$t->start_nginx;
{
    my $r = get('/inh/index.html', 'X-Api-Key' => 'kp');
    is($r->{status}, 200, 'prefix: 200');
    is($t->redis('EXISTS', 'myapp:a:kp'), 1, 'prefix: key myapp:a:kp');
    is($t->redis('EXISTS', 'rl:a:kp'), 0, 'prefix: no rl:a:kp');
    # counters continue under the new prefix only
    $r = get('/inh/index.html', 'X-Api-Key' => 'k1');
    is($r->{status}, 200, 'prefix: k1 (limited under rl:) is fresh under myapp:');
    is($t->redis_window_total('myapp:a:k1'), 1, 'prefix: myapp:a:k1 counted 1');
}

$t->stop_nginx;
$t->no_alerts;

done_testing;
