#!/usr/bin/perl
# Hostile clients (issue 39): what a client sends or does must never take
# it past a limit, nor hang an API call.  Each case was a way past the
# module's promise once; this file keeps them for every feature after.
# One nginx of two workers, one Redis.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use HTTP::Tiny;
use Time::HiRes qw(time sleep);
use RateLimitTest qw(hdr);

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 2);
$t->start_redis;
my $REDIS_PORT = $t->redis_port;

$t->write_conf(<<"EOF" . <<'EOF');
ratelimit_redis 127.0.0.1:$REDIS_PORT timeout=300ms;
EOF
ratelimit_zone z key=$http_x_api_key limit=5 window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    location /z/ { ratelimit zone=z; alias %%TMP%%/html/; }
    location = /q { ratelimit_query zone=z delete=on; }
}
EOF
$t->start_nginx;

sub del {
    my ($path) = @_;
    return HTTP::Tiny->new(timeout => 10)->request('DELETE', $t->url($path));
}

# --- the forgive DELETE is bounded by timeout --------------------------------

{
    kill 'STOP', $t->redis_pid;
    my $start = time;
    my $r = del('/q?zone=z&key=s');
    my $took = time - $start;
    kill 'CONT', $t->redis_pid;
    is($r->{status}, 503, 'DELETE with Redis stalled: 503');
    like($r->{content}, qr/timed out/, 'DELETE with Redis stalled: says it timed out');
    cmp_ok($took, '<', 1.3, sprintf('DELETE with Redis stalled: answered within timeout (300 ms) + 1 s (%.2f s)', $took));
    is(del('/q?zone=z&key=s')->{status}, 204, 'DELETE with Redis back: 204');
}

$t->no_alerts;
done_testing();
