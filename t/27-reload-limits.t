#!/usr/bin/perl
# Reload (HUP): new limits apply, counts kept in Redis; switching Redis;
# old workers exit (Redis connections do not keep them alive); graceful stop.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use RateLimitTest qw(parse_policy hdr);

RateLimitTest::require_module();

my $t  = RateLimitTest->new(workers => 2);
my $t2 = RateLimitTest->new;    # only for a second redis-server
$t->start_redis;
$t2->start_redis;

sub conf {
    my ($redis_port, $limit) = @_;
    $t->write_conf(<<"CONF");
ratelimit_redis 127.0.0.1:$redis_port timeout=1s;
ratelimit_zone api key=\$http_x_api_key limit=$limit window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    location /r/ { ratelimit zone=api; alias %%TMP%%/html/; }
}
CONF
}

sub req { $t->get('/r/index.html', { 'X-Api-Key' => $_[0] }) }

sub workers_settle {
    my ($want, $timeout) = @_;
    my $deadline = time + $timeout;
    my @w;
    while (1) {
        @w = $t->worker_pids;
        return scalar @w if @w == $want || time > $deadline;
        sleep 0.1;
    }
}

conf($t->redis_port, 3);
$t->start_nginx;

my @r = map { req('r1') } 1 .. 3;
is(join(' ', map { $_->{status} } @r), '200 200 200', 'limit 3: three admitted');
is(hdr($r[2], 'X-RateLimit-Remaining'), 0, 'limit 3: remaining 0');
is(workers_settle(2, 3), 2, 'two workers running');

# --- reload with a higher limit: counts survive in redis ----------------------

conf($t->redis_port, 5);
$t->reload;
my $r = req('r1');
is($r->{status}, 200, 'after reload to limit 5: admitted');
is(hdr($r, 'RateLimit-Policy'), '"api";q=5;w=60', 'after reload: new policy');
is(hdr($r, 'X-RateLimit-Remaining'), 1, 'after reload: earlier counts kept (remaining 1)');
is(req('r1')->{status}, 200, 'after reload: 5th admitted');
is(req('r1')->{status}, 429, 'after reload: 6th rejected');
is(workers_settle(2, 5), 2, 'old workers exited after reload');

# --- reload onto another redis ---------------------------------------------------

conf($t2->redis_port, 5);
$t->reload;
$r = req('r1');
is($r->{status}, 200, 'other redis: fresh counts, admitted');
is(hdr($r, 'X-RateLimit-Remaining'), 4, 'other redis: remaining 4');
is($t2->redis_window_total('rl:api:r1'), 1, 'other redis: counted there');
is($t->redis_window_total('rl:api:r1'), 5, 'first redis: unchanged');
is(workers_settle(2, 5), 2, 'old workers exited after second reload');

# --- several reloads in a row under light traffic -------------------------------

for my $i (1 .. 3) {
    conf($t->redis_port, 100);
    $t->reload;
    my @s = map { req("loop$i")->{status} } 1 .. 3;
    is("@s", '200 200 200', "reload $i: requests served");
}
is(workers_settle(2, 5), 2, 'no stray workers after repeated reloads');

# --- graceful stop --------------------------------------------------------------

ok($t->stop_nginx(5), 'nginx stops gracefully (QUIT) within 5s');
$t->no_alerts;

done_testing;
