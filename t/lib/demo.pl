#!/usr/bin/perl
# ./build.sh demo: Redis and nginx with the module on loopback, requests
# that turn from 200 into 429, and the headers that say why.  Everything
# started here is stopped on the way out.

use strict;
use warnings;
use RateLimitTest;

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 2);
$t->start_redis;
$t->write_conf(<<'EOF_CONF');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=500ms;
ratelimit_zone  api key=$http_x_api_key limit=5 window=10s;

server {
    listen 127.0.0.1:%%PORT%%;

    location /api/ {
        ratelimit zone=api;
        alias %%TMP%%/html/;
    }

    location = /ratelimit {
        ratelimit_query zone=api;
    }
}
EOF_CONF
$t->start_nginx;

print "nginx on 127.0.0.1:", $t->port, ", Redis on 127.0.0.1:",
    $t->redis_port, "\n";
print "zone api: 5 requests per 10 s per X-Api-Key, shared by both workers\n\n";

for my $i (1 .. 7) {
    my $r = $t->get('/api/index.html', { 'X-Api-Key' => 'demo-client' });
    printf "request %d: %s %s\n", $i, $r->{status}, $r->{reason};
    for my $h (qw(ratelimit-policy ratelimit x-ratelimit-limit
                  x-ratelimit-remaining x-ratelimit-reset retry-after))
    {
        my $v = $r->{headers}{$h};
        printf "    %-22s %s\n", "$h:", $v if defined $v;
    }
}

my $q = $t->get('/ratelimit?key=demo-client');
print "\nGET /ratelimit?key=demo-client -> $q->{status}\n    $q->{content}\n";
print "\nRedis holds: ", join(' ', @{ $t->redis('KEYS', 'rl:*') }), "\n";

my @limited = grep { /limiting requests/ } split /\n/, $t->error_log;
print "\nerror.log: $limited[0]\n" if @limited;

$t->stop_all;
print "\nstopped nginx and Redis\n";
