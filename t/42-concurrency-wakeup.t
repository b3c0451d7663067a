#!/usr/bin/perl
# A queued request is woken when the slot it waits for is freed, whatever
# reaches its worker first: the answer to its ask (queued), or the wake-up
# the release published (the slot is now its).  Redis runs the ask, then
# the release, and writes its output to the client it served last first:
# the wake-up, on the worker's subscription, before the ask's answer, on
# its data link.  A worker that knew its waiter only from that answer on
# dropped the wake-up, and the waiter waited for its periodic check (1 s).
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use RateLimitTest;
use HoldBackend;
use HTTP::Tiny;
use IO::Select;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 1);
$t->start_redis;
my $backend = $t->port('BACKEND');
HoldBackend::start($t, $backend);

# The holder's backend is this test: it answers when the test says.
my $held_port = $t->port('HELD');
my $held = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $held_port,
    Listen => 16, ReuseAddr => 1, Proto => 'tcp') or die "listen: $!";

# The Redis timeout is long enough for Redis to be stopped while the ask
# and the release reach it; lease / 3 (renewals) is longer than a case.
my $conf = <<'EOF_CONF';
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=3s fleet_secret_file=%%TMP%%/fleet.secret;
ratelimit_zone one key=$arg_key concurrency=1 queue=5 queue_timeout=10s lease=30s;
log_format w '$arg_key $uri $status t=$msec rt=$request_time qt="$ratelimit_queue_time" ht="$ratelimit_handoff_time" pid=$pid';
server {
    listen 127.0.0.1:%%PORT%%;
    access_log %%TMP%%/wake.log w;
    location /held/ { ratelimit zone=one; proxy_pass http://127.0.0.1:%%HELD%%; }
    location /quick/ { ratelimit zone=one; alias %%TMP%%/html/; }
    location /backend/ { ratelimit zone=one; proxy_pass http://127.0.0.1:%%BACKEND%%; }
}
EOF_CONF
RateLimitTest::_write_file($t->tmp . '/fleet.secret', "the fleet of t/42\n");
chmod 0600, $t->tmp . '/fleet.secret';
$t->write_conf($conf);
$t->start_nginx;

# A second server on the same Redis without the fleet secret: the
# wake-ups its releases publish are unsigned, and it takes the first
# server's signed ones as hints, which it checks with Redis.
my $t2 = RateLimitTest->new(workers => 1);
my $conf2 = $conf =~ s/ fleet_secret_file=\S+;/;/r;
$conf2 =~ s/%%REDIS_PORT%%/$t->redis_port/e;
$conf2 =~ s/%%BACKEND%%/$backend/g;
$conf2 =~ s/%%HELD%%/$held_port/g;
$t2->write_conf($conf2);
$t2->start_nginx;
my %server = (1 => $t, 2 => $t2);

# Bytes Redis has received and not read yet, over all its connections
# (/proc/net/tcp: local port, then "tx_queue:rx_queue" in hex).
sub redis_unread {
    my $port = sprintf '%04X', $t->redis_port;
    my $n = 0;
    open my $f, '<', '/proc/net/tcp' or die "/proc/net/tcp: $!";
    while (<$f>) {
        my @f = split;
        $n += hex((split /:/, $f[4])[1]) if ($f[1] // '') =~ /:$port$/ && $f[3] eq '01';
    }
    return $n;
}

# Connections of process $pid to Redis that hold bytes it has not read.
sub unread_from_redis {
    my ($pid) = @_;
    my %mine;
    for my $fd (glob "/proc/$pid/fd/*") {
        $mine{$1} = 1 if (readlink($fd) // '') =~ /^socket:\[(\d+)\]$/;
    }
    my $port = sprintf '%04X', $t->redis_port;
    my $n = 0;
    open my $f, '<', '/proc/net/tcp' or die "/proc/net/tcp: $!";
    while (<$f>) {
        my @f = split;
        $n++ if ($f[2] // '') =~ /:$port$/ && $mine{ $f[9] } && hex((split /:/, $f[4])[1]) > 0;
    }
    return $n;
}

sub wait_for {
    my ($what, $cond) = @_;
    my $deadline = time + 3;
    sleep 0.001 until $cond->() || time > $deadline;
    return ok($cond->(), $what);
}

sub send_get {
    my ($port, $path) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port) or die "connect: $!";
    print $s "GET $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    return $s;
}

sub read_all {
    my ($s) = @_;
    my $sel = IO::Select->new($s);
    my $got = '';
    while ($sel->can_read(5)) {
        sysread($s, $got, 4096, length $got) or last;
    }
    return $got;
}

# The log line of the request for $uri of subject $key on $srv: end time,
# queued or not.
sub logged {
    my ($srv, $key, $uri) = @_;
    my $line;
    my $deadline = time + 2;
    until (($line) = RateLimitTest::_read_file($srv->tmp . '/wake.log') =~ /^(\Q$key $uri\E .*)$/m) {
        last if time > $deadline;
        sleep 0.02;
    }
    my %f = ($line // '') =~ /(\w+)="?([^" ]*)"?/g;
    return \%f;
}

# Redis's round trip as this test sees it, the best of 5 (a PING).
sub redis_round_trip {
    my $best = 1;
    for (1 .. 5) {
        my $start = time;
        $t->redis('PING');
        $best = time - $start if time - $start < $best;
    }
    return $best;
}

# A holds the slot (its backend, this test, has its request); Redis is
# stopped; B asks (its call waits in Redis's socket); A's backend answers
# and A gives its slot back (that call waits too); B's worker is stopped,
# Redis goes on: it runs B's ask (queued), then A's release (the slot to
# B, published), and writes the wake-up, then the ask's answer; B's worker
# goes on with both in its sockets.  B must be served within a round trip
# of that, not at its periodic check.
my $margin = 0.1;
for my $case ([1, 1, 'the same worker, signed'], [2, 2, 'the same worker, unsigned'],
              [1, 2, 'another worker and server, signed by the releasing server'],
              [2, 1, 'another worker and server, unsigned'])
{
    my ($a_srv, $b_srv, $name) = @$case;
    subtest "released after the next ask reached Redis: $name" => sub {
        my $key = "w$a_srv$b_srv";
        my $a = send_get($server{$a_srv}->port('PORT'), "/held/x?key=$key");
        my $sel = IO::Select->new($held);
        ok($sel->can_read(5), 'the holder reached its backend') or return;
        my $up = $held->accept;
        my $req = '';
        sysread($up, $req, 4096, length $req) until $req =~ /\r\n\r\n/;
        is($t->redis('ZCARD', "{rl:one:$key}:held"), 1, 'it holds the slot');

        my $before = redis_unread();
        kill 'STOP', $t->redis_pid;
        my $b = send_get($server{$b_srv}->port('PORT'), "/quick/index.html?key=$key");
        wait_for('the next ask reached stopped Redis', sub { redis_unread() > $before });
        my $asked = redis_unread();
        print $up "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n";
        close $up;
        wait_for('... then the release', sub { redis_unread() > $asked });
        my ($worker) = $server{$b_srv}->worker_pids;
        kill 'STOP', $worker;
        kill 'CONT', $t->redis_pid;
        wait_for("the ask's answer and the wake-up reached B's stopped worker",
                 sub { unread_from_redis($worker) >= 2 });
        my $go = time;
        kill 'CONT', $worker;

        like(read_all($b), qr{^HTTP/1.1 200 .*index page}s, 'the next request is served');
        like(read_all($a), qr{^HTTP/1.1 200 }, 'the holder was served');
        my $rtt = redis_round_trip();
        my $e = logged($server{$b_srv}, $key, '/quick/index.html');
        like($e->{qt} // '', qr/^\d+$/, 'it was queued: its ask ran before the release');
        my $after = ($e->{t} // 0) - $go;
        cmp_ok($after, '<', $rtt + $margin,
               "served within a Redis round trip + ${\($margin * 1000)} ms of its worker learning of the release")
            or diag sprintf 'served %.3f s after its worker went on (round trip %.4f s)', $after, $rtt;
        note sprintf 'served %.4f s after its worker went on', $after;
    };
}

# A server whose Redis user may not subscribe gets no wake-up: its waiter
# learns of its slot from its periodic check, whose answer says when Redis
# gave the slot, so that its hand-off is timed all the same: from then to
# the check's answer.  Redis gave it after the holder's response left the
# backend, so the hand-off is no longer than from then to the waiter's
# response reaching the client, read by one clock (Redis gives the time in
# whole ms: 1 ms more); the holder is released 200 ms after the waiter
# queued, so a hand-off timed from the waiter's ask would be longer.
subtest 'no wake-up (a Redis user that may not subscribe): the check times the hand-off' => sub {
    $t->redis('ACL', 'SETUSER', 'nosub', 'on', '>nosub-pw', '~*', '&*', '+@all',
              '-subscribe', '-psubscribe', '-ssubscribe');
    my $t3 = RateLimitTest->new(workers => 1);
    (my $conf3 = $conf2) =~ s/^(ratelimit_redis \S+)/$1 user=nosub password=nosub-pw/m;
    $t3->write_conf($conf3);
    $t3->start_nginx;
    my $key = 'nosub';
    my $a = send_get($t3->port('PORT'), "/held/x?key=$key");
    ok(IO::Select->new($held)->can_read(5), 'the holder reached its backend') or return;
    my $up = $held->accept;
    my $req = '';
    sysread($up, $req, 4096, length $req) until $req =~ /\r\n\r\n/;
    my $b = send_get($t3->port('PORT'), "/quick/index.html?key=$key");
    wait_for('the next request waits in the queue',
             sub { $t->redis('ZCARD', "{rl:one:$key}:queue") == 1 });
    sleep 0.2;
    my $released = time;
    print $up "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n";
    close $up;
    like(read_all($a), qr{^HTTP/1.1 200 }, 'the holder was served');
    like(read_all($b), qr{^HTTP/1.1 200 .*index page}s, 'the waiter was served');
    my $received = time;
    my $e = logged($t3, $key, '/quick/index.html');
    like($e->{qt} // '', qr/^\d+$/, 'it waited in the queue');
    like($e->{ht} // '', qr/^\d+\.\d{3}$/, 'its hand-off is timed, though no wake-up came')
        or diag "ht=\"$e->{ht}\"";
    my $bound = 1000 * ($received - $released) + 1;
    cmp_ok(($e->{ht} // '') =~ /^[\d.]+$/ ? $e->{ht} : 1e9, '<=', $bound,
           '... no longer than from the holder\'s release to the waiter\'s response')
        or diag sprintf 'ht %s ms, released %.4f, waiter received %.4f (qt %s, rt %s)',
                        $e->{ht} // '-', $released, $received, $e->{qt} // '-', $e->{rt} // '-';
    $t3->no_alerts;
    $t3->stop_nginx;
};

# One subject's requests one after the other, each on a new connection to
# either server, now of two workers each: a release and the next ask race
# to Redis and to the workers.  None waits for the periodic check.
subtest '300 requests one after the other: none waits for the periodic check' => sub {
    for my $srv ($t, $t2) {
        (my $c = $srv->conf_text) =~ s/^worker_processes 1;/worker_processes 2;/m;
        RateLimitTest::_write_file($srv->conf_path, $c);
        $srv->{nginx_workers} = 2;
        $srv->reload;
    }
    my %status;
    for my $i (1 .. 300) {
        my $srv = $i % 2 ? $t : $t2;
        my $r = HTTP::Tiny->new(timeout => 10, keep_alive => 0)
            ->get('http://127.0.0.1:' . $srv->port('PORT') . "/backend/x?key=seq&seq=$i&hold=0");
        $status{ $r->{status} }++;
    }
    is(join(' ', map { "$_ x $status{$_}" } sort keys %status), '200 x 300', 'all served');
    # nginx logs a request after its response has gone: the last line may
    # come after the client has read it.
    my @rt;
    RateLimitTest::wait_until(sub {
        @rt = map { RateLimitTest::_read_file($_->tmp . '/wake.log') =~ /^seq \S+ 200 t=\S+ rt=(\S+)/mg } $t, $t2;
        @rt >= 300;
    }, 3);
    is(scalar @rt, 300, 'all 300 logged');
    my @slow = grep { $_ >= 0.5 } @rt;
    is(scalar @slow, 0, 'no request took 0.5 s or more (the check comes after 1 s)')
        or diag "@slow";
};

$t->no_alerts;
$t2->no_alerts;
done_testing;
