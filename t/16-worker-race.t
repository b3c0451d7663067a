#!/usr/bin/perl
# Concurrency: two workers, many parallel clients, the limit is exact.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use RateLimitTest;

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 2);
$t->start_redis;
$t->write_conf(<<'EOF');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=2s;
ratelimit_zone api key=$http_x_api_key limit=50 window=60s;
ratelimit_zone two key=$http_x_api_key limit=30 window=60s;

server {
    listen 127.0.0.1:%%PORT%% reuseport;
    add_header X-RL-Status "$ratelimit_status" always;
    location /c/   { ratelimit zone=api; alias %%TMP%%/html/; }
    location /two/ { ratelimit zone=two; alias %%TMP%%/html/; }
}
EOF
$t->start_nginx;

{
    my @res = $t->parallel_get(clients => 8, requests => 200, path => '/c/index.html',
        headers => { 'X-Api-Key' => 'conc' });
    is(scalar @res, 200, '200 responses received');
    my %by;
    $by{ $_->{status} }++ for @res;
    is($by{200} // 0, 50, 'exactly 50 admitted');
    is($by{429} // 0, 150, 'exactly 150 rejected');
    my %rs;
    $rs{ $_->{headers}{'x-rl-status'} // '' }++ for @res;
    is($rs{ERROR} // 0, 0, 'no redis errors') or diag(explain \%rs);
    is($t->redis_window_total('rl:api:conc'), 50, 'redis counts 50');

    # remaining values of the admitted requests are 49..0, each exactly once
    my @rem = sort { $a <=> $b } map { $_->{headers}{'x-ratelimit-remaining'} // -1 }
        grep { $_->{status} == 200 } @res;
    is("@rem", join(' ', 0 .. 49), 'admitted requests saw remaining 49..0 once each');

    my @e = $t->access_entries_for('/c/index.html', 200);
    my %pids = map { $_->{pid} => 1 } @e;
    is(scalar keys %pids, 2, 'both workers served requests');
    is($t->wait_log(qr/limiting requests by zone "api"/, 150), 150, '150 "limiting requests" log lines');
}

{
    # two subjects interleaved from 8 clients (keep-alive connections)
    my @res = $t->parallel_get(clients => 8, requests => 160, keep_alive => 1,
        requests_for => sub { my ($c, $i) = @_; ('/two/a.html', { 'X-Api-Key' => ($i % 2 ? 'ka' : 'kb') }) });
    is(scalar @res, 160, '160 responses received');
    my $ok = grep { $_->{status} == 200 } @res;
    my $rej = grep { $_->{status} == 429 } @res;
    is($ok, 60, 'two subjects: exactly 2 x 30 admitted');
    is($rej, 100, 'two subjects: the rest rejected');
    is($t->redis_window_total('rl:two:ka'), 30, 'subject ka counts 30');
    is($t->redis_window_total('rl:two:kb'), 30, 'subject kb counts 30');
}

$t->stop_nginx;
$t->no_alerts;

done_testing;
