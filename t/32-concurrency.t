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
use POSIX ();
use Time::HiRes qw(time sleep);

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 2);
$t->start_redis;
my $backend = $t->port('BACKEND');
HoldBackend::start($t, $backend);

my $conf = <<'EOF_CONF';
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=300ms;
ratelimit_zone fifo key=$arg_key concurrency=4 queue=200 queue_timeout=20s;
ratelimit_zone small key=$arg_key concurrency=1 queue=1 queue_timeout=600ms lease=1s;
ratelimit_zone rate key=$arg_key rate=1000r/s;
log_format q '$request_uri $status rs=$ratelimit_status qt="$ratelimit_queue_time"';
server {
    listen 127.0.0.1:%%PORT%%;
    access_log %%TMP%%/queue.log q;
    location /fifo/ { ratelimit zone=fifo; proxy_pass http://127.0.0.1:%%BACKEND%%; }
    location /small/ { ratelimit zone=small; proxy_pass http://127.0.0.1:%%BACKEND%%; }
    location /both/ {
        ratelimit zone=rate;
        ratelimit zone=small;
        proxy_pass http://127.0.0.1:%%BACKEND%%;
    }
}
EOF_CONF
$t->write_conf($conf);
$t->start_nginx;

# A second nginx server on the same Redis.
my $t2 = RateLimitTest->new(workers => 2);
my $conf2 = $conf;
$conf2 =~ s/%%REDIS_PORT%%/$t->redis_port/e;
$conf2 =~ s/%%BACKEND%%/$backend/g;
$t2->write_conf($conf2);
$t2->start_nginx;

# Forks one client per entry of @$plan ([$port, $path, $at]), each sending
# at $t0 + $at; returns [status, elapsed, body] per entry, in plan order.
sub clients {
    my ($plan, $close_after) = @_;
    my $t0 = time + 0.3;
    my @pids;
    for my $i (0 .. $#$plan) {
        my ($port, $path, $at) = @{ $plan->[$i] };
        my $pid = fork // die "fork: $!";
        if ($pid == 0) {
            sleep($t0 + $at - time) if $t0 + $at > time;
            my $start = time;
            my $r = HTTP::Tiny->new(timeout => 30)->get("http://127.0.0.1:$port$path");
            open my $f, '>', $t->tmp . "/c.$i" or POSIX::_exit(1);
            printf $f "%s %.3f %s", $r->{status}, time - $start, $r->{content} // '';
            close $f;
            POSIX::_exit(0);
        }
        push @pids, $pid;
    }
    waitpid $_, 0 for @pids;
    my @out;
    for my $i (0 .. $#$plan) {
        open my $f, '<', $t->tmp . "/c.$i" or die;
        my ($st, $el, $body) = split / /, do { local $/; <$f> }, 3;
        push @out, [ $st, $el, $body ];
        unlink $t->tmp . "/c.$i";
    }
    return @out;
}

subtest 'two servers x two workers, 64 clients, N = 4: FIFO, never more than 4' => sub {
    my @plan = map {
        [ $_ % 2 ? $t2->port('PORT') : $t->port('PORT'), "/fifo/x?key=f1&seq=$_&hold=100", $_ * 0.02 ]
    } 0 .. 63;
    my @res = clients(\@plan);
    is(scalar(grep { $_->[0] == 200 } @res), 64, 'every request answered 200')
        or diag join ' ', map { $_->[0] } @res;
    my $st = HoldBackend::stats($backend, 'f1');
    is($st->{max}, 4, 'the backend never saw more than 4 in flight');
    is(join(',', @{ $st->{order} }), join(',', 0 .. 63), 'arrival order is the order of the queue');
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

$t->no_alerts;
$t2->no_alerts;
done_testing;
