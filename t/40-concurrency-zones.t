#!/usr/bin/perl
# Concurrency zones: at most N requests of a subject in flight across the
# fleet, a first-in first-out queue for the excess, slots that come back
# when a worker dies, and the fail policy when Redis does not answer.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use RateLimitTest;
use HoldBackend;
use HTTP::Tiny;
use Digest::SHA ();
use IO::Select;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(time sleep);

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 2);
$t->start_redis;
my $backend = $t->port('BACKEND');
HoldBackend::start($t, $backend);

my $conf = <<'EOF_CONF';
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=300ms fleet_secret_file=%%TMP%%/fleet.secret;
ratelimit_zone fifo key=$arg_key concurrency=4 queue=200 queue_timeout=20s;
ratelimit_zone small key=$arg_key concurrency=1 queue=1 queue_timeout=600ms lease=1s;
ratelimit_zone one key=$arg_key concurrency=1 queue=5 queue_timeout=5s lease=1s;
ratelimit_zone rate key=$arg_key rate=1000r/s;
log_format q '$request_uri $status rs=$ratelimit_status qt="$ratelimit_queue_time" t=$msec rt=$request_time pid=$pid ht="$ratelimit_handoff_time"';
server {
    listen 127.0.0.1:%%PORT%%;
    access_log %%TMP%%/queue.log q;
    location = /metrics { ratelimit_metrics; }
    location /fifo/ { ratelimit zone=fifo; proxy_pass http://127.0.0.1:%%BACKEND%%; }
    location /small/ { ratelimit zone=small; proxy_pass http://127.0.0.1:%%BACKEND%%; }
    location /one/ { ratelimit zone=one; proxy_pass http://127.0.0.1:%%BACKEND%%; }
    location /static/ { ratelimit zone=one; alias %%TMP%%/html/; }
    location /closed/ {
        ratelimit zone=one;
        ratelimit_fail closed;
        proxy_pass http://127.0.0.1:%%BACKEND%%;
    }
    location /both/ {
        ratelimit zone=rate;
        ratelimit zone=small;
        proxy_pass http://127.0.0.1:%%BACKEND%%;
    }
}
EOF_CONF
my $FLEET_SECRET = 'the fleet of t/40';
RateLimitTest::_write_file($t->tmp . '/fleet.secret', "$FLEET_SECRET\n");
chmod 0600, $t->tmp . '/fleet.secret';
$t->write_conf($conf);
$t->start_nginx;

# A second nginx server on the same Redis, without the fleet secret (as
# while a fleet is given one): its calls publish unsigned wake-ups, and it
# takes the first server's signed ones as hints, which it checks.
my $t2 = RateLimitTest->new(workers => 2);
my $conf2 = $conf =~ s/ fleet_secret_file=\S+;/;/r;
$conf2 =~ s/%%REDIS_PORT%%/$t->redis_port/e;
$conf2 =~ s/%%BACKEND%%/$backend/g;
$t2->write_conf($conf2);
$t2->start_nginx;

# Forks one client per entry of @$plan ([$port, $path, $at]), each sending
# at $t0 + $at; returns [status, elapsed, body, sent] per entry, in plan
# order.
sub clients {
    my ($plan) = @_;
    my $t0 = time + 0.3 + 0.01 * @$plan;
    my @pids;
    for my $i (0 .. $#$plan) {
        my ($port, $path, $at) = @{ $plan->[$i] };
        my $pid = fork // die "fork: $!";
        if ($pid == 0) {
            sleep($t0 + $at - time) if $t0 + $at > time;
            my $start = time;
            my $r = HTTP::Tiny->new(timeout => 30)->get("http://127.0.0.1:$port$path");
            open my $f, '>', $t->tmp . "/c.$i" or POSIX::_exit(1);
            printf $f "%s %.3f %.6f %s", $r->{status}, time - $start, $start, $r->{content} // '';
            close $f;
            POSIX::_exit(0);
        }
        push @pids, $pid;
    }
    waitpid $_, 0 for @pids;
    my @out;
    for my $i (0 .. $#$plan) {
        open my $f, '<', $t->tmp . "/c.$i" or die;
        my ($st, $el, $sent, $body) = split / /, do { local $/; <$f> }, 4;
        push @out, [ $st, $el, $body, $sent ];
        unlink $t->tmp . "/c.$i";
    }
    return @out;
}

subtest 'bad concurrency zones fail nginx -t with file:line' => sub {
    my $c = RateLimitTest->new;
    my @cases = (
        [ 'ratelimit_zone z key=$arg_k concurrency=2 queue=x;', qr/invalid queue "x" in \S+:\d+/ ],
        [ 'ratelimit_zone z key=$arg_k concurrency=0;', qr/invalid concurrency "0" in \S+:\d+/ ],
        [ 'ratelimit_zone z key=$arg_k concurrency=2 rate=1r/s;', qr/"rate=" is for rate zones; "z" is a concurrency zone \(concurrency=\) in \S+:\d+/ ],
        [ 'ratelimit_zone z key=$arg_k concurrency=2 lease=100ms;', qr/invalid lease "100ms"/ ],
        [ 'ratelimit_zone z key=$arg_k concurrency=2 queue=1 queue=2;', qr/duplicate parameter "queue=2"/ ],
        [ "ratelimit_zone z key=\$arg_k concurrency=2;\nratelimit_zone y key=\$arg_k concurrency=2;\n"
            . "server { listen 127.0.0.1:%%PORT%%; location / { ratelimit zone=z; ratelimit zone=y; } }",
          qr/a location takes one concurrency zone/ ],
    );
    for my $case (@cases) {
        $c->write_conf("ratelimit_redis 127.0.0.1:1;\n$case->[0]\n");
        my ($status, $out) = $c->nginx_t;
        isnt($status, 0, "refused: $case->[0]");
        like($out, $case->[1], '... saying why');
    }
};

# Sends 40 ms apart reach Redis in their order; slots, freed every 100 ms
# (400 ms / 4), reach the backend in the order Redis gave them.  On a
# loaded machine a client process may send late: the order expected is
# that of the times the clients really sent, and sends less than 10 ms
# apart may reach Redis in either order.  Slots freed together (a worker
# that was not scheduled for a while answers several at once) are given in
# order in Redis, but the waiters' workers then race to the backend: those
# given their slots within 10 ms of each other may reach it in either
# order.
subtest 'two servers x two workers, 64 clients, N = 4: FIFO, never more than 4' => sub {
    my @plan = map {
        [ $_ % 2 ? $t2->port('PORT') : $t->port('PORT'), "/fifo/x?key=f1&seq=$_&hold=400", $_ * 0.04 ]
    } 0 .. 63;
    my @res = clients(\@plan);
    is(scalar(grep { $_->[0] == 200 } @res), 64, 'every request answered 200')
        or diag join ' ', map { $_->[0] } @res;
    my $st = HoldBackend::stats($backend, 'f1');
    is($st->{max}, 4, 'the backend never saw more than 4 in flight');
    # When each was given its slot, by its worker's clock: its start plus
    # its $ratelimit_queue_time.
    my %admitted;
    for my $log (map { RateLimitTest::_read_file($_->tmp . '/queue.log') } $t, $t2) {
        while ($log =~ /seq=(\d+)&hold=400 200 \S+ qt="(\d*|-)" t=([\d.]+) rt=([\d.]+)/g) {
            $admitted{$1} = $3 - $4 + ($2 eq "-" ? 0 : $2) / 1000;
        }
    }
    my @order = @{ $st->{order} };
    my (@unfair, @reordered);
    for my $i (0 .. 63) {
        for my $j ($i + 1 .. 63) {
            my ($x, $y) = ($order[$i], $order[$j]);
            push @unfair, "$y before $x" if $res[$y][3] < $res[$x][3] - 0.010
                && $admitted{$y} < $admitted{$x} - 0.010;
            push @reordered, "$y before $x" if $admitted{$y} < $admitted{$x} - 0.010;
        }
    }
    is(scalar(keys %admitted), 64, 'all 64 logged');
    # $ratelimit_handoff_time: a release to its waiter's resumption, timed
    # by the two workers' clocks (of one host here), or from Redis's grant
    # when the waiter's check told it first; empty for the 4 that had a
    # slot at once.
    my (@handoff, $direct);
    for my $log (map { RateLimitTest::_read_file($_->tmp . '/queue.log') } $t, $t2) {
        while ($log =~ /hold=400 200 \S+ qt="(\d+|-)" .* ht="([\d.]+|-)"/g) {
            $direct++ if $1 eq '-' && $2 eq '-';
            push @handoff, $2 if $1 ne '-' && $2 ne '-';
        }
    }
    is($direct, 4, 'no hand-off time for the 4 admitted at once');
    is(scalar @handoff, 60, 'a hand-off time for each of the 60 waiters');
    @handoff = sort { $a <=> $b } @handoff;
    cmp_ok($handoff[ $#handoff / 2 ], '<', 20, 'median hand-off under 20 ms')
        or diag "@handoff";
    is(join(', ', @unfair), '', 'each was given its slot in the order of the sends, hence of the queue');
    is(join(', ', @reordered), '', 'the backend saw them in the order they were given their slots')
        or diag join ',', @order;
};

subtest 'queue full: 429 at once; wait timeout: 429 after queue_timeout' => sub {
    my @res = clients([
        [ $t->port('PORT'), '/small/x?key=s1&seq=0&hold=1500', 0 ],
        [ $t->port('PORT'), '/small/x?key=s1&seq=1&hold=10', 0.1 ],
        [ $t->port('PORT'), '/small/x?key=s1&seq=2&hold=10', 0.2 ],
    ]);
    is($res[0][0], 200, 'the holder is served');
    is($res[1][0], 429, 'the waiter gets 429 ...');
    cmp_ok(abs($res[1][1] - 0.6), '<', 0.1, '... after queue_timeout (600 ms)') or diag $res[1][1];
    is($res[2][0], 429, 'the queue full: 429 ...');
    cmp_ok($res[2][1], '<', 0.1, '... at once');
};

# Redis's own count of script calls, for the bound docs/directives.md documents.
sub script_calls {
    my $info = $t->redis('INFO', 'commandstats');
    my $n = 0;
    $n += $1 while $info =~ /^cmdstat_(?:evalsha|eval):calls=(\d+)/mg;
    return $n;
}

sub held { $t->redis('ZCARD', "{rl:$_[0]:$_[1]}:held") }

subtest 'a client closing while queued: the next waiter is served at once' => sub {
    my $pid = fork // die;
    if ($pid == 0) {
        sleep 0.4;    # queued second, behind the holder
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t->port('PORT'));
        print $s "GET /one/x?key=c1&seq=1&hold=10 HTTP/1.1\r\nHost: x\r\n\r\n";
        sleep 0.2;
        close $s;
        POSIX::_exit(0);
    }
    my @res = clients([
        [ $t->port('PORT'), '/one/x?key=c1&seq=0&hold=800', 0 ],
        [ $t->port('PORT'), '/one/x?key=c1&seq=2&hold=10', 0.3 ],
    ]);
    waitpid $pid, 0;
    is($res[1][0], 200, 'the waiter behind the one that left is served');
    cmp_ok($res[1][1], '<', 0.5 + 0.15, '... as soon as the holder is done') or diag $res[1][1];
    is(join(',', @{ HoldBackend::stats($backend, 'c1')->{order} }), '0,2', 'the gone client never reached the backend');
    sleep 0.2;
    is(held('one', 'c1'), 0, 'no slot left held');
};

# Anyone who may PUBLISH on the Redis can name waiting requests on the
# workers' channels (PUBSUB CHANNELS lists them; request numbers count up
# from 1): a wake-up unsigned, or signed with another key, is only a hint,
# which the waiter checks with Redis.
sub forge_wakeups {
    my ($max_seq) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t->redis_port) or die "redis: $!";
    my $resp = sub { join '', '*' . @_ . "\r\n", map { '$' . length($_) . "\r\n$_\r\n" } @_ };
    print $s $resp->('PUBSUB', 'CHANNELS', 'rl:wake:*');
    my $n = 0 + (<$s> =~ /^\*(\d+)/)[0];
    my @channels = map { scalar <$s>; my $c = <$s>; $c =~ s/\r\n//; $c } 1 .. $n;
    for my $c (@channels) {
        (my $worker = $c) =~ s/^rl:wake://;
        print $s $resp->('PUBLISH', $c, "$worker.$_ 0" . ($_ % 2 ? '' : ' ' . ('0' x 40))) for 1 .. $max_seq;
    }
    scalar <$s> for 1 .. @channels * $max_seq;
    return scalar @channels;
}

# Every wake-up a call of the first server makes is signed with the key
# derived from its fleet secret, as the module's C++ side checks it.
sub wake_signature_ok {
    my ($message) = @_;
    my $key = Digest::SHA::hmac_sha1_hex('ratelimit wake-up', $FLEET_SECRET);
    my ($text, $sig) = $message =~ /^(\S+ \d+) ([0-9a-f]{40})$/ or return 0;
    return Digest::SHA::sha1_hex("$key:$text:$key") eq $sig;
}

subtest 'forged wake-ups admit no one' => sub {
    my $listener = fork // die;
    if ($listener == 0) {
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t->redis_port) or POSIX::_exit(1);
        print $s "*2\r\n\$10\r\nPSUBSCRIBE\r\n\$9\r\nrl:wake:*\r\n";
        open my $out, '>', $t->tmp . '/wakeups' or POSIX::_exit(1);
        $out->autoflush(1);
        while (defined(my $line = <$s>)) {
            print $out $line;
        }
        POSIX::_exit(0);
    }
    my $pid = fork // die;
    if ($pid == 0) {
        # While the first holds its slot and three wait, and again while
        # the second holds it.
        for (1 .. 3) {
            sleep 0.4;
            forge_wakeups(2000);
        }
        POSIX::_exit(0);
    }
    my @res = clients([ map { [ $t->port('PORT'), "/one/x?key=fw&seq=$_&hold=700", 0.05 * $_ ] } 0 .. 3 ]);
    waitpid $pid, 0;
    is(join(' ', map { $_->[0] } @res), '200 200 200 200', 'every request served in turn');
    my $stats = HoldBackend::stats($backend, 'fw');
    is($stats->{max}, 1, 'never two in flight');
    is(join(',', @{ $stats->{order} }), '0,1,2,3', '... in their order');
    kill 'TERM', $listener;
    waitpid $listener, 0;
    # psubscribe, pattern, then per message: pmessage, pattern, channel,
    # message
    my @bulks = grep { !/^[*\$:]/ } map { s/\r\n$//r } split /^/, RateLimitTest::_read_file($t->tmp . '/wakeups');
    splice @bulks, 0, 2;
    my @real = grep { !/ 0$/ && !/ 0 0{40}$/ } map { $bulks[$_] } grep { $_ % 4 == 3 } 0 .. $#bulks;
    is(scalar @real, 3, 'the three real wake-ups seen on the channels') or diag(join "\n", @real[0 .. ($#real < 5 ? $#real : 5)]);
    is(scalar(grep { wake_signature_ok($_) } @real), scalar @real, '... each signed with the key of the fleet secret')
        or diag(join "\n", @real);
};

subtest 'a long request (3 x lease) keeps its slot' => sub {
    my @res = clients([
        [ $t->port('PORT'), '/small/x?key=l1&seq=0&hold=3500', 0 ],
        [ $t->port('PORT'), '/small/x?key=l1&seq=1&hold=10', 3.0 ],
        [ $t->port('PORT'), '/small/x?key=l1&seq=2&hold=10', 3.05 ],
    ]);
    is($res[0][0], 200, 'the long request is served');
    # The two late ones: one takes the one place in the queue, the other
    # finds it full.  Which comes first is the machine's choice when it is
    # busy; their client processes may also start late, which the long
    # request's 0.5 s past them allows for (within queue_timeout).  Had the
    # slot been lost, one would take it, the other the queue: both pass.
    is(join(' ', sort map { $_->[0] } @res[1, 2]), '200 429',
        'at 3 leases its slot is still taken: one waits, one finds the queue full');
    is(HoldBackend::stats($backend, 'l1')->{max}, 1, 'never two in flight');
};

subtest 'a slot goes back with the response, though nginx keeps the request' => sub {
    # A GET or a HEAD (its response only a header) that announces a body it
    # never sends: nginx answers, then keeps the request for
    # lingering_timeout (5 s) to discard that body.
    for my $m (['GET', qr/index page\n/], ['HEAD', qr/\r\n\r\n/]) {
        my ($method, $end) = @$m;
        my $key = "d-$method";
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t->port('PORT'))
            or die "connect: $!";
        print $s "$method /static/index.html?key=$key HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n";
        my $sel = IO::Select->new($s);
        my $got = '';
        while ($got !~ $end && $sel->can_read(5)) {
            sysread($s, $got, 4096, length $got) or last;
        }
        like($got, qr{^HTTP/1.1 200 .*$end}s, "$method: the first request is answered");
        my $start = time;
        my $r = HTTP::Tiny->new(timeout => 10)->get('http://127.0.0.1:' . $t->port('PORT') . "/static/index.html?key=$key");
        my $took = time - $start;
        is($r->{status}, 200, "$method: the next request of the subject is served");
        cmp_ok($took, '<', 1, '... at once: the first gave its slot back with its response') or diag $took;
        close $s;
    }
};

subtest 'a worker killed while holding slots: capacity back within lease + 1 s' => sub {
    # On the second server, whose workers are killed: the first keeps a
    # clean error log.
    my @pids;
    for my $i (0, 1) {
        my $pid = fork // die;
        if ($pid == 0) {
            # Not HTTP::Tiny: it sends a GET again when its connection
            # is reset, and the new worker would take the slot.
            my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t2->port('PORT'));
            print $s "GET /one/x?key=k$i&seq=0&hold=20000 HTTP/1.1\r\nHost: x\r\n\r\n";
            my $reply = <$s>;
            POSIX::_exit(0);
        }
        push @pids, $pid;
    }
    my $deadline = time + 3;
    sleep 0.05 while time < $deadline && (held('one', 'k0') + held('one', 'k1')) < 2;
    is(held('one', 'k0') + held('one', 'k1'), 2, 'both slots held');
    kill 'KILL', $t2->worker_pids;
    my $killed = time;
    my @res = clients([ map { [ $t->port('PORT'), "/one/x?key=k$_&seq=1&hold=10", 0 ] } 0, 1 ]);
    my $back = time - $killed;
    kill 'KILL', @pids;
    waitpid $_, 0 for @pids;
    is(join(' ', map { $_->[0] } @res), '200 200', 'served once the dead leases ran out')
        or diag explain \@res;
    cmp_ok($back, '<', 1 + 1, 'within lease + 1 s of the kill') or diag $back;
    cmp_ok($back, '>', 0.5, '... and not before the slots were free') or diag $back;
};

subtest 'redis calls per request, and per waiting request' => sub {
    sleep 0.5;
    my $before = script_calls();
    my @res = clients([ map { [ $t->port('PORT'), "/fifo/x?key=n$_&seq=0&hold=10", $_ * 0.01 ] } 0 .. 9 ]);
    my $alone = (script_calls() - $before) / 10;
    is($alone, 2, 'a request that does not wait: 2 calls (take, give back)');
    $before = script_calls();
    @res = clients([
        [ $t->port('PORT'), '/one/x?key=w1&seq=0&hold=2500', 0 ],
        [ $t->port('PORT'), '/one/x?key=w1&seq=1&hold=10', 0.1 ],
    ]);
    my $calls = script_calls() - $before;
    # The holder: take, 2 renewals (every lease / 3 = 333 ms, 2.5 s),
    # give back.  The waiter: take, one check a second, one on its wake-up,
    # give back.
    my $holder = 2 + int(2.5 / 0.333);
    my $waiter_bound = 3 + POSIX::ceil(2.4 / 1);
    cmp_ok($calls - $holder, '<=', $waiter_bound, "the waiter made at most 3 + ceil(wait / 1 s) calls")
        or diag "calls $calls";
};

subtest 'a rate zone and a concurrency zone: one refused counts in no rate zone' => sub {
    my @res = clients([
        [ $t->port('PORT'), '/both/x?key=b1&seq=0&hold=400', 0 ],
        [ $t->port('PORT'), '/both/x?key=b1&seq=1&hold=10', 0.1 ],
        [ $t->port('PORT'), '/both/x?key=b1&seq=2&hold=10', 0.2 ],
    ]);
    is(join(' ', map { $_->[0] } @res), '200 200 429', 'held, waited, refused');
    is($t->redis_window_total('rl:rate:b1'), 2, 'the rate zone counted the two served, once each');
    like(RateLimitTest::_read_file($t->tmp . "/queue.log"), qr{seq=1&hold=10 200 rs=PASSED qt="[1-9]\d*"}, '$ratelimit_queue_time of the waiter');
};

subtest 'redis stopped: the fail policy within timeout; consistent after' => sub {
    my @waiters = map {
        my $i = $_;
        my $pid = fork // die;
        if ($pid == 0) {
            my $r = HTTP::Tiny->new(timeout => 30)->get($t->url("/one/x?key=r1&seq=$i&hold=" . ($i ? 10 : 1500)));
            POSIX::_exit($r->{status} == 200 ? 0 : 1);
        }
        sleep 0.2;
        $pid;
    } 0, 1;
    kill 'STOP', $t->redis_pid;
    my $start = time;
    my $r = $t->get('/one/x?key=r2&seq=0&hold=10');
    my $took = time - $start;
    my $c = $t->get('/closed/x?key=r3&seq=0&hold=10');
    is($r->{status}, 200, 'fail open: passed');
    cmp_ok($took, '<', 0.3 + 0.2, '... within timeout (300 ms)') or diag $took;
    is($c->{status}, 503, 'fail closed: 503');
    sleep 1.5;
    kill 'CONT', $t->redis_pid;
    for (@waiters) { waitpid $_, 0 }
    sleep 1.5;
    is(held('one', 'r1') + held('one', 'r2') + held('one', 'r3'), 0, 'no slot held once Redis is back and the requests are done');
};

subtest 'reload under queued load: no request lost, no slot leaked' => sub {
    my $pid = fork // die;
    if ($pid == 0) {
        sleep 0.8;
        $t->reload;
        POSIX::_exit(0);
    }
    my @res = clients([ map { [ $t->port('PORT'), "/fifo/x?key=rl&seq=$_&hold=150", $_ * 0.03 ] } 0 .. 29 ]);
    waitpid $pid, 0;
    is(scalar(grep { $_->[0] == 200 } @res), 30, 'all 30 answered 200') or diag join ' ', map { $_->[0] } @res;
    is(HoldBackend::stats($backend, 'rl')->{max}, 4, 'never more than 4');
    sleep 0.3;
    is(held('fifo', 'rl'), 0, 'no slot leaked');
};

subtest 'metrics: the concurrency zone figures' => sub {
    my $m = $t->get('/metrics?format=json')->{content};
    my ($fifo) = $m =~ /"fifo":\{([^}]*)/;
    my ($one) = $m =~ /"one":\{(.*?"queue_wait")/;
    my ($small) = $m =~ /"small":\{(.*?"queue_wait")/;
    like($fifo, qr/"passed":[1-9]/, 'admissions counted as passed');
    like($one, qr/"in_flight":0,"queued":0,"queue_limit":5,"admitted":[1-9]\d*,"admitted_after_wait":[1-9]\d*,/,
         'in flight, queued, queue limit, admitted at once and after waiting');
    like($one, qr/"gone_while_queued":1\b/, 'the client gone while queued');
    like($small, qr/"queue_full":[1-9]\d*,"wait_timeout":[1-9]/, 'queue full, wait timeouts');
    like($m, qr/"one":\{.*?"successful_responses":[1-9]\d*,"busy_seconds":[\d.]+,"requests_per_second":[1-9]/,
         'successful requests per busy second');
    my $p = $t->get('/metrics')->{content};
    like($p, qr/^nginx_ratelimit_concurrency_queue_wait_seconds_count\{zone="fifo"\} [1-9]/m, 'the wait histogram');
};

$t->no_alerts;
my @alerts = grep { /\[(?:alert|emerg)\]/ && !/exited on signal 9/ } split /\n/, $t2->error_log;
ok(!@alerts, 'no alert on the second server but the workers killed') or diag join "\n", @alerts;
done_testing;
