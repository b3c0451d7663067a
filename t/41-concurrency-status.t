#!/usr/bin/perl
# The status API (ratelimit_query) and the peek header report concurrency
# zones: per zone and subject, the limit, the requests in flight and queued
# across the fleet (as Redis holds them), and the queue's limit, counting
# nothing and taking no slot; alone or beside rate zones, in the order of
# the configuration; 503 when Redis does not answer.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use RateLimitTest;
use HoldBackend;
use HTTP::Tiny;
use JSON::PP ();
use POSIX ();
use Time::HiRes qw(time sleep);

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 2);

subtest 'ratelimit_query takes concurrency zones, any number of them' => sub {
    $t->write_conf(<<'EOF');
ratelimit_redis 127.0.0.1:1;
ratelimit_zone c key=$arg_key concurrency=2;
ratelimit_zone d key=$arg_key concurrency=3;
ratelimit_zone r key=$arg_key limit=5 window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    location / { ratelimit_query zone=c zone=r zone=d; }
}
EOF
    my ($status, $out) = $t->nginx_t;
    is($status, 0, 'nginx -t accepts it') or diag $out;
};

$t->start_redis;
my $backend = $t->port('BACKEND');
HoldBackend::start($t, $backend);

$t->write_conf(<<'EOF');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=300ms;
ratelimit_zone c key=$arg_key concurrency=2 queue=3 queue_timeout=10s lease=2s;
ratelimit_zone r key=$arg_key limit=10 window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    ratelimit_peek_header X-Peek;
    location /c/ { ratelimit zone=c; proxy_pass http://127.0.0.1:%%BACKEND%%; }
    location /mix/ {
        ratelimit zone=r;
        ratelimit zone=c;
        proxy_pass http://127.0.0.1:%%BACKEND%%;
    }
    location = /status { ratelimit_query zone=c; }
    location = /rate-first { ratelimit_query zone=r zone=c; }
    location = /slot-first { ratelimit_query zone=c zone=r; }
}
EOF
$t->start_nginx;

sub json_of {
    my ($r) = @_;
    my $data = eval { JSON::PP->new->decode($r->{content}) };
    return $data // { error => "not JSON: $r->{status} $r->{content}" };
}

sub status_of {
    my ($key, $path) = @_;
    my $r = $t->get(($path // '/status') . "?key=$key");
    return ($r->{status}, json_of($r));
}

sub slot_fields {
    my ($o) = @_;
    return join ' ', map { "$_=" . ($o->{$_} // 'none') }
        qw(zone key type limit in_flight queued queue_limit);
}

# Forks a client that sends GET $path at once; returns its pid.
sub hold {
    my ($path) = @_;
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        HTTP::Tiny->new(timeout => 20)->get($t->url($path));
        POSIX::_exit(0);
    }
    return $pid;
}

subtest 'a subject never seen: nothing in flight, nothing queued' => sub {
    my ($st, $data) = status_of('never');
    is($st, 200, 'answered 200');
    is(scalar @$data, 1, 'one object');
    is(slot_fields($data->[0]),
       'zone=c key=never type=concurrency limit=2 in_flight=0 queued=0 queue_limit=3',
       'its fields');
    is_deeply([sort keys %{ $data->[0] }],
              [qw(in_flight key limit queue_limit queued type zone)], 'and no others');
    is(scalar(@{ $t->redis('KEYS', '*') }), 0, 'nothing written to Redis');
};

subtest 'requests held and queued, then released' => sub {
    my @pids;
    for my $seq (0 .. 4) {
        push @pids, hold("/c/x?key=h&seq=$seq&hold=1500");
        sleep 0.05;
    }
    ok(RateLimitTest::wait_until(sub { HoldBackend::stats($backend, 'h')->{in_flight} == 2 }, 3),
       'the backend holds 2');
    sleep 0.1;
    my ($st, $data) = status_of('h');
    is($st, 200, 'answered 200');
    is(slot_fields($data->[0]),
       'zone=c key=h type=concurrency limit=2 in_flight=2 queued=3 queue_limit=3',
       '2 in flight, 3 queued');
    my $r = $t->get('/status?key_hex=68');    # "h"
    is(slot_fields(json_of($r)->[0]),
       'zone=c key=h type=concurrency limit=2 in_flight=2 queued=3 queue_limit=3',
       'key_hex= reports the same subject');
    status_of('h') for 1 .. 5;
    is($t->redis('ZCARD', '{rl:c:h}:held'), 2, 'queries took no slot');
    is($t->redis('ZCARD', '{rl:c:h}:queue'), 3, '... and no place in the queue');

    waitpid $_, 0 for @pids;
    my $st_h = HoldBackend::stats($backend, 'h');
    is($st_h->{count}, 5, 'every held request reached the backend');
    is($st_h->{max}, 2, '... never more than 2 at once');
    ($st, $data) = status_of('h');
    is(slot_fields($data->[0]),
       'zone=c key=h type=concurrency limit=2 in_flight=0 queued=0 queue_limit=3',
       'after the release: 0 in flight, 0 queued');
};

subtest 'mixed with rate zones: in the order configured, rate objects as before' => sub {
    $t->get("/mix/x?key=m&seq=$_&hold=10") for 0 .. 1;
    my $pid = hold('/mix/x?key=m&seq=2&hold=1000');
    ok(RateLimitTest::wait_until(sub { HoldBackend::stats($backend, 'm')->{in_flight} == 1 }, 3),
       'one request of m held');

    my ($st, $data) = status_of('m', '/rate-first');
    is($st, 200, 'answered 200');
    is(join(',', map { $_->{zone} } @$data), 'r,c', 'r, then c');
    is_deeply([sort keys %{ $data->[0] }],
              [qw(key limit remaining reset retry_after used window zone)],
              'the rate object has its fields, no type');
    is("$data->[0]{used} $data->[0]{remaining}", '3 7', 'r counted the 3 requests');
    is(slot_fields($data->[1]),
       'zone=c key=m type=concurrency limit=2 in_flight=1 queued=0 queue_limit=3',
       'c has the held one in flight');

    ($st, $data) = status_of('m', '/slot-first');
    is(join(',', map { $_->{zone} } @$data), 'c,r', 'c, then r');
    is($data->[1]{used}, 3, 'still 3: the queries counted nothing');

    my $r = $t->get('/rate-first?key=m&interval=10s');
    $data = json_of($r);
    is($data->[0]{count_in_interval}, 3, 'interval: the rate zone counts');
    ok(!exists $data->[1]{interval}, 'the concurrency zone takes no interval');
    waitpid $pid, 0;
};

subtest 'peek header: the location\'s concurrency zone beside its rate zone' => sub {
    my $pid = hold('/mix/x?key=p&seq=0&hold=1000');
    ok(RateLimitTest::wait_until(sub { HoldBackend::stats($backend, 'p')->{in_flight} == 1 }, 3),
       'one request of p held');
    my $r = $t->get('/mix/x?key=p&seq=1&hold=10', { 'X-Peek' => '1' });
    is($r->{status}, 200, 'answered 200');
    my $data = json_of($r);
    is(join(',', map { $_->{zone} } @$data), 'r,c', 'r, then c, as configured');
    is($data->[0]{used}, 1, 'r has the held request');
    is(slot_fields($data->[1]),
       'zone=c key=p type=concurrency limit=2 in_flight=1 queued=0 queue_limit=3',
       'c has it in flight');
    $r = $t->get('/c/x?key=p&seq=2&hold=10', { 'X-Peek' => '1' });
    is(slot_fields(json_of($r)->[0]),
       'zone=c key=p type=concurrency limit=2 in_flight=1 queued=0 queue_limit=3',
       'a location of the concurrency zone alone');
    is(HoldBackend::stats($backend, 'p')->{count}, 1, 'the peeks never reached the backend');
    waitpid $pid, 0;
    my ($st, $q) = status_of('p', '/rate-first');
    is($q->[0]{used}, 1, 'nor were they counted');
    is($q->[1]{in_flight}, 0, 'nothing held after the release');
};

subtest 'Redis down: 503' => sub {
    $t->stop_redis;
    my $r = $t->get('/status?key=h');
    is($r->{status}, 503, 'the status API answers 503');
    like($r->{content}, qr/"error":"redis unavailable"/, '... with its error');
    $r = $t->get('/slot-first?key=h');
    is($r->{status}, 503, 'mixed: 503');
    $r = $t->get('/mix/x?key=h&seq=9&hold=10', { 'X-Peek' => '1' });
    is($r->{status}, 503, 'the peek header: 503');
    cmp_ok($r->{elapsed}, '<', 1, '... at once');
};

$t->no_alerts;
$t->stop_nginx;
done_testing;
