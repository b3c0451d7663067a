#!/usr/bin/perl
# Calls pipelined on a connection.  With a call in flight (Redis stopped with
# SIGSTOP, so that it stays in flight), a loop turn's batch of at least 8
# requests is sent behind it at once; a smaller one waits for a reply; past
# 4 calls in flight every batch waits.  The worker is stopped while the
# requests are written to idle keep-alive connections, so that one loop turn
# reads them all.  Whatever was pipelined, every request is answered once
# Redis runs again and Redis counts each exactly once.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use IO::Socket::INET;
use Time::HiRes qw(sleep time);
use FaultTest qw(parse_response);

RateLimitTest::require_module();

my $t = FaultTest->new(workers => 1);
my @STOPPED;    # pids to SIGCONT whatever happens
END { kill 'CONT', @STOPPED if @STOPPED }

$t->start_redis;
$t->write_conf(<<'EOC');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=5s;
ratelimit_zone api key=$http_x_api_key limit=1000 window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    location = /metrics { ratelimit_metrics; }
    location /lim/  { ratelimit zone=api; alias %%TMP%%/html/; }
    location /free/ { alias %%TMP%%/html/; }
}
EOC
$t->start_nginx;
ok(defined(($t->wait_passed('lim', 'warm', 3))[0]), 'redis up');

my $port = $t->port('PORT');
my ($worker) = $t->worker_pids;

sub calls_sent {
    my ($r) = FaultTest::raw_get($port, '/metrics', {}, 3);
    return $r->{body} =~ /^nginx_ratelimit_redis_calls_total (\d+)/m
        ? $1 : -1;
}

# Idle keep-alive connections, each having served one unlimited request.
sub idle_connections {
    my ($n) = @_;
    my @socks;
    for (1 .. $n) {
        my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port",
                                      Timeout => 3) or die "connect: $!";
        print $s "GET /free/index.html HTTP/1.1\r\nHost: x\r\n\r\n";
        my $buf = '';
        while ($buf !~ /\r\n\r\n.*\n/s) {
            sysread($s, $buf, 4096, length $buf) or die "read: $!";
        }
        push @socks, $s;
    }
    return @socks;
}

# Requests of subjects "$tag-1".. written while the worker is stopped: one
# loop turn reads them all.
sub one_turn {
    my ($tag, @socks) = @_;
    kill 'STOP', $worker;
    push @STOPPED, $worker;
    my $i = 0;
    for my $s (@socks) {
        $i++;
        print $s "GET /lim/index.html HTTP/1.1\r\nHost: x\r\n"
            . "X-Api-Key: $tag-$i\r\n\r\n";
    }
    sleep 0.05;
    kill 'CONT', $worker;
    pop @STOPPED;
    sleep 0.2;
}

my @lone = idle_connections(1);
my @batches = map { [idle_connections(10)] } 1 .. 5;
my @small = idle_connections(3);
my $before = calls_sent();

kill 'STOP', $t->redis_pid;
push @STOPPED, $t->redis_pid;

one_turn('lone', @lone);
is(calls_sent(), $before + 1, 'a request on an idle link is sent at once');

one_turn('small', @small);
is(calls_sent(), $before + 1,
   '3 requests wait behind the call in flight');

one_turn('b1', @{ $batches[0] });
is(calls_sent(), $before + 2,
   '10 requests are pipelined behind the call in flight');

one_turn("b$_", @{ $batches[$_ - 1] }) for 2, 3;
is(calls_sent(), $before + 4, 'up to 4 calls in flight');

one_turn('b4', @{ $batches[3] });
is(calls_sent(), $before + 4, 'past 4 calls in flight, a batch waits');

my $t0 = time;
kill 'CONT', $t->redis_pid;
@STOPPED = ();

my (%status, $answered);
for my $s (@lone, @small, map { @$_ } @batches[0 .. 3]) {
    my $buf = '';
    $s->blocking(0);
    my $deadline = time + 5;
    while ($buf !~ /\r\n\r\n.*\n/s && time < $deadline) {
        my $n = sysread($s, $buf, 4096, length $buf);
        sleep 0.01 unless $n;
    }
    my $r = parse_response($buf);
    $status{ $r->{status} }++;
    $answered++;
}
is_deeply(\%status, { 200 => 44 }, 'all 44 requests passed once Redis ran')
    or diag(explain(\%status));
cmp_ok(time - $t0, '<', 3, '... within 3 s');

my $counted = 0;
$counted += $t->redis_window_total($_) for grep { !/warm/ } $t->redis_keys('*');
is($counted, 44, 'Redis counted each request once');

$t->stop_and_check('pipelined calls');
done_testing;
