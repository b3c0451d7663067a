#!/usr/bin/perl
# Beside nginx's own modules of the preaccess phase: the module decides
# after realip (its keys see the client's address, not the proxy's) and
# after limit_req (a request limit_req rejects is counted in no zone).

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
ratelimit_zone ip key=$remote_addr limit=2 window=60s;
ratelimit_zone counted key=$http_x_api_key limit=100 window=60s;
limit_req_zone $http_x_api_key zone=lr:1m rate=1r/m;

server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-Addr "$remote_addr" always;
    add_header X-RL-Status "$ratelimit_status" always;

    location /realip/ {
        set_real_ip_from 127.0.0.1;
        real_ip_header X-Real-IP;
        ratelimit zone=ip;
        alias %%TMP%%/html/;
    }

    location /limit_req/ {
        limit_req zone=lr;
        ratelimit zone=counted;
        alias %%TMP%%/html/;
    }
}
EOF
$t->start_nginx;

# realip in the location: each client behind the proxy is its own subject.
{
    my @order = map { "10.0.0.$_" } 1, 2, 1, 2, 1, 2;
    my @r = map { $t->get('/realip/a.html', { 'X-Real-IP' => $_ }) } @order;
    is(join(' ', map { $_->{status} } @r), '200 200 200 200 429 429',
        'realip: two clients behind one proxy, limit 2 each');
    is(join(' ', map { hdr($_, 'X-Addr') // '-' } @r), join(' ', @order),
        'realip: $remote_addr is the client, as realip set it');
    my @keys = $t->redis_keys('*');
    is(join(' ', map { my $ip = $_; scalar grep { /\Q$ip\E/ } @keys }
                 '10.0.0.1', '10.0.0.2', '127.0.0.1'),
        '1 1 0', 'realip: one Redis key per client, none for the proxy')
        or diag("keys: @keys");
}

# limit_req in the same location: what it rejects is counted nowhere.
{
    my @r = map { $t->get('/limit_req/a.html', { 'X-Api-Key' => 'lr1' }) }
        1 .. 4;
    is(join(' ', map { $_->{status} } @r), '200 503 503 503',
        'limit_req: one request a minute passes, the rest rejected by it');
    is(join(' ', map { hdr($_, 'X-RL-Status') // '-' } @r), 'PASSED - - -',
        'limit_req: its rejections never reached the module');
    my ($key) = grep { /counted/ && /lr1/ } $t->redis_keys('*');
    is(defined $key ? $t->redis_window_total($key) : undef, 1,
        'limit_req: the zone counted only the request limit_req let through');
}

$t->stop_all;
done_testing();
