#!/usr/bin/perl
# ratelimit_status, ratelimit_headers, ratelimit_log_level.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use RateLimitTest qw(hdr);

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 1);
$t->start_redis;
$t->write_conf(<<'EOF');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=1s;
ratelimit_zone st  key=$http_x_api_key limit=1 window=60s;
ratelimit_zone hd  key=$http_x_api_key limit=1 window=60s;
ratelimit_zone lw  key=$http_x_api_key limit=1 window=60s;
ratelimit_zone ln  key=$http_x_api_key limit=1 window=60s;
ratelimit_zone li  key=$http_x_api_key limit=1 window=60s;
ratelimit_zone le  key=$http_x_api_key limit=1 window=60s;
ratelimit_zone inh key=$http_x_api_key limit=1 window=60s;
ratelimit_zone po  key=$http_x_api_key limit=1 window=60s;

server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    location /st/   { ratelimit zone=st; ratelimit_status 503; alias %%TMP%%/html/; }
    location /st4/  { ratelimit zone=st; ratelimit_status 403; alias %%TMP%%/html/; }
    location /hd/   { ratelimit zone=hd; ratelimit_headers off; alias %%TMP%%/html/; }
    location /lw/   { ratelimit zone=lw; ratelimit_log_level warn; alias %%TMP%%/html/; }
    location /ln/   { ratelimit zone=ln; ratelimit_log_level notice; alias %%TMP%%/html/; }
    location /li/   { ratelimit zone=li; ratelimit_log_level info; alias %%TMP%%/html/; }
    location /le/   { ratelimit zone=le; alias %%TMP%%/html/; }
    location /post/ { ratelimit zone=po; proxy_pass http://127.0.0.1:%%PORT2%%/; }
    location /free/ { alias %%TMP%%/html/; }
}

server {
    listen 127.0.0.1:%%PORT2%%;
    ratelimit_status 418;
    ratelimit_headers off;
    ratelimit_log_level warn;
    location /inh/ { ratelimit zone=inh; alias %%TMP%%/html/; }
    location = /echo { return 200 "posted\n"; }
}
EOF
$t->start_nginx;

sub two {
    my ($path, $key, $port) = @_;
    return map { $t->get($path, { 'X-Api-Key' => $key }, $port ? (port => $port) : ()) } 1 .. 2;
}
sub no_rl_headers {
    my ($r) = @_;
    return !grep { defined hdr($r, $_) }
        qw(RateLimit RateLimit-Policy X-RateLimit-Limit X-RateLimit-Remaining X-RateLimit-Reset);
}

{
    my @r = two('/st/a.html', 's1');
    is($r[0]{status}, 200, 'ratelimit_status 503: first 200');
    is($r[1]{status}, 503, 'ratelimit_status 503: rejected with 503');
    is(hdr($r[1], 'X-RL-Status'), 'REJECTED', 'ratelimit_status 503: REJECTED (not ERROR)');
    is(hdr($r[1], 'X-RateLimit-Remaining'), 0, 'ratelimit_status 503: headers present');
    ok(defined hdr($r[1], 'Retry-After'), 'ratelimit_status 503: Retry-After present');
    my $r = $t->get('/st4/a.html', { 'X-Api-Key' => 's1' });
    is($r->{status}, 403, 'ratelimit_status 403');
}

{
    my @r = two('/hd/a.html', 'h1');
    is($r[0]{status} . ' ' . $r[1]{status}, '200 429', 'ratelimit_headers off: still limited');
    ok(no_rl_headers($r[0]), 'ratelimit_headers off: no headers on 200');
    ok(no_rl_headers($r[1]), 'ratelimit_headers off: no headers on 429');
    is(hdr($r[1], 'X-RL-Status'), 'REJECTED', 'ratelimit_headers off: variables still set');
    my @e = $t->access_entries_for('/hd/a.html', 2);
    is(join(',', map { "$_->{lim}/$_->{rem}" } @e), '1/0,1/0', 'ratelimit_headers off: $ratelimit_limit/remaining still set');
}

{
    two('/le/a.html', 'l1');
    two('/lw/a.html', 'l1');
    two('/ln/a.html', 'l1');
    two('/li/a.html', 'l1');
    $t->wait_log(qr/limiting requests by zone "li"/, 1);
    is($t->count_log(qr/\[error\] .*limiting requests by zone "le"/), 1, 'default log level: [error]');
    is($t->count_log(qr/\[warn\] .*limiting requests by zone "lw"/), 1, 'ratelimit_log_level warn');
    is($t->count_log(qr/\[notice\] .*limiting requests by zone "ln"/), 1, 'ratelimit_log_level notice');
    is($t->count_log(qr/\[info\] .*limiting requests by zone "li"/), 1, 'ratelimit_log_level info');
    is($t->count_log(qr/limiting requests by zone "l[ewni]"/), 4, 'exactly one line per rejection');
}

{
    my @r = two('/inh/a.html', 'i1', $t->port('PORT2'));
    is($r[0]{status} . ' ' . $r[1]{status}, '200 418', 'server-level ratelimit_status inherited');
    ok(no_rl_headers($r[0]) && no_rl_headers($r[1]), 'server-level ratelimit_headers off inherited');
    $t->wait_log(qr/limiting requests by zone "inh"/, 1);
    is($t->count_log(qr/\[warn\] .*limiting requests by zone "inh"/), 1, 'server-level ratelimit_log_level inherited');
}

{
    # a rejected request with a body: the body is discarded, the connection
    # stays usable (the body is not taken for the next request)
    my $body = 'b' x 3000;
    my $post = "POST /post/echo HTTP/1.1\r\nHost: x\r\nX-Api-Key: pb\r\n"
        . "Content-Type: text/plain\r\nContent-Length: " . length($body) . "\r\n\r\n$body";
    my $get = "GET /free/a.html HTTP/1.1\r\nHost: x\r\n\r\n";
    my @r = $t->raw_exchange($post, $post, $get);
    is($r[0]{status}, 200, 'POST: first admitted');
    is($r[0]{content}, "posted\n", 'POST: proxied with its body');
    is($r[1]{status}, 429, 'POST: second rejected');
    ok($r[2] && ($r[2]{closed} || ($r[2]{status} // 0) == 200),
        'POST: after a rejected POST the connection is either closed or serves the next request')
        or diag(explain \@r);
    is($r[2]{content}, "page a\n", 'POST: next request on the same connection served')
        if $r[2] && !$r[2]{closed};
}

$t->stop_nginx;
$t->no_alerts;

done_testing;
