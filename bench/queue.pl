#!/usr/bin/perl
# Benchmark of concurrency zones, run by `./build.sh bench` after run.pl:
#
#   RATELIMIT_MODULE=build/ngx_http_ratelimit_module.so perl -I t/lib bench/queue.pl
#
# 1. One subject, N = 8, 64 clients, each request held 50 ms by the
#    backend (t/lib/HoldBackend.pm): the module (one nginx, two workers)
#    against HAProxy's `maxconn 8` and `timeout queue`.  Throughput against
#    the ideal N / hold, the most in flight at the backend, the queue wait
#    (latency - hold) at p50/p99, order inversions (a request reaching the
#    backend before one sent earlier), and the hand-off, timed by the
#    backend: from a response leaving it while all N were in flight to the
#    next request arriving.  That span holds the proxy's reading of the
#    response and its end (when nginx sends the release, HAProxy frees its
#    server slot), the hand-off itself (for the module: the release's
#    Redis call, the slot given in Redis, its PUBLISH, the wake-up in the
#    waiter's worker), the proxied request's way to the backend, and the
#    wake-ups of the processes on the way.
#    Each case runs twice: with a new backend connection per request (the
#    span then also holds the connect, and the backend's accept and a
#    second round of its select loop), and with kept-alive backend
#    connections (nginx `keepalive`, HAProxy `http-reuse always`, the
#    backend's keep_alive), where the request goes out on an idle
#    connection, so the span is the hand-off and what no proxy can avoid:
#    the backend -> proxy -> backend wake-ups, and the proxy's own work.
# 2. Two HAProxy instances against two nginx servers, the same load split
#    between them: the most in flight at the backend.
# 3. Overhead without queueing: a concurrency zone with N high against a
#    sliding-window zone, on a static file, with wrk.
# Appends its report to bench/results.md (BENCH_OUT).
use strict;
use warnings;

use FindBin qw($Bin);
use lib "$Bin/../t/lib";
use RateLimitTest;
use HoldBackend;
use HTTP::Tiny;
use POSIX ();
use Time::HiRes qw(time sleep);

$| = 1;
my $SECONDS = $ENV{BENCH_QUEUE_SECONDS} // 8;
my $OUT     = $ENV{BENCH_OUT} // "$Bin/results.md";
my ($N, $CLIENTS, $HOLD_MS) = (8, 64, 50);

RateLimitTest::require_module();
my $haproxy = -x '/usr/sbin/haproxy' ? '/usr/sbin/haproxy' : die "haproxy not installed\n";

my $t = RateLimitTest->new(workers => 2);
$t->start_redis;
my $backend = $t->port('BACKEND');
my $kept = $t->port('BACKEND_KEPT');
HoldBackend::start($t, $backend);
HoldBackend::start($t, $kept, keep_alive => 1);

my $conf = <<"EOF_CONF";
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=100ms fleet_secret_file=%%TMP%%/fleet.secret;
ratelimit_zone conc key=\$arg_key concurrency=$N queue=1000 queue_timeout=30s;
ratelimit_zone wide key=\$http_x_api_key concurrency=1000000 queue=0;
ratelimit_zone slide key=\$http_x_api_key rate=1000000r/m;
upstream kept { server 127.0.0.1:$kept; keepalive 16; }
log_format handoff '\$arg_key \$status \$ratelimit_queue_time \$ratelimit_handoff_time';
server {
    listen 127.0.0.1:%%PORT%%;
    access_log %%TMP%%/handoff.log handoff;
    location /q/ { ratelimit zone=conc; proxy_pass http://127.0.0.1:$backend; }
    location /k/ {
        ratelimit zone=conc;
        proxy_pass http://kept;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
    }
    location = /wide.html { ratelimit zone=wide; alias %%TMP%%/html/index.html; }
    location = /slide.html { ratelimit zone=slide; alias %%TMP%%/html/index.html; }
}
EOF_CONF
# One fleet secret: the wake-ups are signed, and resume their waiters
# without asking Redis again.
my $t2 = RateLimitTest->new(workers => 2);
for my $dir ($t->tmp, $t2->tmp) {
    RateLimitTest::_write_file("$dir/fleet.secret", "bench fleet\n");
    chmod 0600, "$dir/fleet.secret";
}
$t->write_conf($conf);
$t->start_nginx;

(my $conf2 = $conf) =~ s/%%REDIS_PORT%%/$t->redis_port/e;
$t2->write_conf($conf2);
$t2->start_nginx;

sub start_haproxy {
    my ($name, $port, $port_kept) = @_;
    my $cfg = $t->tmp . "/$name.cfg";
    open my $f, '>', $cfg or die;
    print $f <<"EOF_HA";
global
    maxconn 2000
defaults
    mode http
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    timeout queue 30s
frontend in
    bind 127.0.0.1:$port
    default_backend out
backend out
    server s1 127.0.0.1:$backend maxconn $N
frontend in_kept
    bind 127.0.0.1:$port_kept
    default_backend out_kept
backend out_kept
    http-reuse always
    server s1 127.0.0.1:$kept maxconn $N
EOF_HA
    close $f;
    my $pid = $t->start_child($name, sub { exec $haproxy, '-db', '-f', $cfg or die "exec: $!" });
    sleep 0.3;
    return $pid;
}

my @ha = (start_haproxy('haproxy1', $t->port('HA1'), $t->port('HA1_KEPT')),
    start_haproxy('haproxy2', $t->port('HA2'), $t->port('HA2_KEPT')));

# The module's own hand-offs for the subject $key: $ratelimit_handoff_time
# (ms, from the release to the waiter's resumption, by the two workers'
# clocks) of each request that waited and was served, from both nginx
# servers' logs.  A
# waiter that learned of its slot by its check has none: it counts as
# slower than any.  Empty for HAProxy's subjects.
sub slot_handoffs {
    my ($key) = @_;
    my @ms;
    for my $log (map { $_->tmp . '/handoff.log' } $t, $t2) {
        open my $f, '<', $log or next;
        while (<$f>) {
            my ($k, $status, $queued, $ms) = split;
            push @ms, $ms eq '-' ? 9e9 : $ms if $k eq $key && $status == 200 && $queued ne '-';
        }
    }
    return sort { $a <=> $b } @ms;
}

# $CLIENTS clients for $SECONDS, each sending to $ports->[client % @ports]
# under $path; returns the latencies (s).
sub load {
    my ($ports, $path, $key) = @_;
    my $stop = time + 0.5 + $SECONDS;
    my @pids;
    for my $c (0 .. $CLIENTS - 1) {
        my $pid = fork // die;
        if ($pid == 0) {
            my $ua = HTTP::Tiny->new(timeout => 60);
            my $port = $ports->[ $c % @$ports ];
            my @lat;
            sleep 0.5 + $c * 0.002;
            while (time < $stop) {
                my $sent = time;
                my $seq = int($sent * 1e6);
                my $r = $ua->get("http://127.0.0.1:$port$path?key=$key&seq=$seq&hold=$HOLD_MS");
                push @lat, time - $sent if $r->{status} == 200;
            }
            open my $f, '>', $t->tmp . "/lat.$c" or POSIX::_exit(1);
            print $f join("\n", @lat);
            close $f;
            POSIX::_exit(0);
        }
        push @pids, $pid;
    }
    waitpid $_, 0 for @pids;
    my @all;
    for my $c (0 .. $CLIENTS - 1) {
        open my $f, '<', $t->tmp . "/lat.$c" or next;
        push @all, grep { length } split /\n/, do { local $/; <$f> };
    }
    return sort { $a <=> $b } @all;
}

sub pct { my ($p, @v) = @_; @v ? $v[ POSIX::floor($p * $#v) ] : 0 }

# A module hand-off percentile as the report shows it.
sub slot_ms {
    my ($r, $which) = @_;
    return '-' unless $r->{slots};
    return $r->{$which} == 9e9 ? 'none (check)' : sprintf '%.3f', $r->{$which};
}

sub run_case {
    my ($label, $ports, $key, $keep) = @_;
    my @lat = load($ports, $keep ? '/k/x' : '/q/x', $key);
    my $port = $keep ? $kept : $backend;
    my $st = HoldBackend::stats($port, $key);
    my $ev = HoldBackend::events($port, $key);
    my ($inv, $last, $in, @handoff) = (0, 0, 0);
    my $last_leave;
    for my $e (@$ev) {
        my ($kind, $at, $seq) = @$e;
        if ($kind eq 'arrive') {
            # Sent 2 ms or more before one that reached the backend first:
            # closer sends may reach Redis in either order.
            $inv++ if $seq < $last - 2000;
            $last = $seq if $seq > $last;
            push @handoff, $at - $last_leave if $in == $N - 1 && defined $last_leave;
            $in++;
        } else {
            $in--;
            $last_leave = $at if $in == $N - 1;
        }
    }
    @handoff = sort { $a <=> $b } @handoff;
    my @slot = slot_handoffs($key);
    my $hold = $HOLD_MS / 1000;
    my @wait = map { $_ > $hold ? $_ - $hold : 0 } @lat;
    my %r = (label => $label, rps => @lat / $SECONDS, ideal => $N / $hold, max => $st->{max},
        wait50 => pct(0.5, @wait) * 1000, wait99 => pct(0.99, @wait) * 1000, inversions => $inv,
        requests => scalar @lat, hand50 => pct(0.5, @handoff) * 1000, hand99 => pct(0.99, @handoff) * 1000,
        slot50 => pct(0.5, @slot), slot99 => pct(0.99, @slot), slots => scalar @slot,
        unknown => scalar grep { $_ == 9e9 } @slot);
    printf STDERR "%-40s %7.1f req/s (ideal %d), max in flight %d, wait p50 %.1f p99 %.1f ms, "
        . "inversions %d, hand-off p50 %.2f p99 %.2f ms, module's p50 %s p99 %s ms\n",
        @r{qw(label rps ideal max wait50 wait99 inversions hand50 hand99)}, slot_ms(\%r, 'slot50'),
        slot_ms(\%r, 'slot99');
    return \%r;
}

my @nginx = ([ $t->port('PORT') ], [ $t->port('PORT'), $t2->port('PORT') ]);
my @rows = (
    run_case('module, one nginx (2 workers), N = 8', $nginx[0], 'm1'),
    run_case('HAProxy maxconn 8, one instance', [ $t->port('HA1') ], 'h1'),
    run_case('module, two nginx servers, N = 8', $nginx[1], 'm2'),
    run_case('HAProxy maxconn 8, two instances', [ $t->port('HA1'), $t->port('HA2') ], 'h2'),
    run_case('module, one nginx, kept-alive backend connections', $nginx[0], 'k1', 1),
    run_case('HAProxy, one instance, kept-alive backend connections', [ $t->port('HA1_KEPT') ], 'k2', 1),
    run_case('module, two nginx servers, kept-alive backend connections', $nginx[1], 'k3', 1),
);

# Overhead: wrk on a static file, 10,000 subjects, alternated.
sub wrk {
    my ($path) = @_;
    my $out = `wrk -t1 -c50 -d${SECONDS}s -s $Bin/keys.lua http://127.0.0.1:@{[ $t->port('PORT') ]}$path 2>&1`;
    my ($rps) = $out =~ /Requests\/sec:\s+([\d.]+)/;
    return $rps // 0;
}

my (@wide, @slide);
for (1 .. 2) {
    push @slide, wrk('/slide.html');
    push @wide, wrk('/wide.html');
}
my $ratio = (($wide[0] + $wide[1]) / 2) / ((($slide[0] + $slide[1]) / 2) || 1);
printf STDERR "overhead: concurrency zone %s req/s, sliding %s req/s, ratio %.2f\n",
    join('/', map { int } @wide), join('/', map { int } @slide), $ratio;

my $report = "\n## Concurrency zones (bench/queue.pl, " . POSIX::strftime('%Y-%m-%d', gmtime) . ")\n\n"
    . "One subject, N = $N, $CLIENTS clients, backend holds each request $HOLD_MS ms, $SECONDS s per case.\n\n"
    . "| case | req/s | ideal | max in flight at backend | queue wait p50 ms | p99 ms | order inversions "
    . "| hand-off at the backend p50 ms | p99 ms | module's hand-off p50 ms | p99 ms |\n"
    . "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
$report .= sprintf "| %s | %.1f | %d | %d | %.1f | %.1f | %d of %d | %.2f | %.2f | %s | %s |\n",
    @{$_}{qw(label rps ideal max wait50 wait99 inversions requests hand50 hand99)},
    slot_ms($_, 'slot50'), slot_ms($_, 'slot99') for @rows;
$report .= "\nHand-off: timed by the backend, from a response leaving it while all N were in flight to the "
    . "next request arriving: the proxy's reading of the response and its end (the module's release, "
    . "HAProxy's freed server slot), the hand-off (the module: Redis gives the slot, PUBLISH, the waiter's "
    . "worker wakes), and the request's way to the backend.  With a new backend connection per request "
    . "that way holds a connect and the backend's accept; with kept-alive backend connections "
    . "(nginx `keepalive`, HAProxy `http-reuse always`) the request goes out on an idle one.\n"
    . "\nThe module's hand-off: `\$ratelimit_handoff_time` of each request that waited, from the moment "
    . "its worker sent the release that freed the slot to the moment the waiter's worker resumed it "
    . "(Redis gives the slot, PUBLISH, the wake-up), by the two workers' clocks; a waiter told by its "
    . "check instead of Pub/Sub counts as slower than any.\n";
$report .= sprintf "\nNo queueing (N = 1,000,000, static file, wrk 50 connections, 10,000 subjects): "
    . "concurrency zone %s req/s against a sliding-window zone's %s, ratio %.2f.\n",
    join(' / ', map { int } @wide), join(' / ', map { int } @slide), $ratio;
my @targets;
for my $r (grep { $_->{slots} } @rows) {
    my $ok = $r->{slot50} <= 1 && $r->{slot99} <= 5;
    push @targets, sprintf "    %s a freed slot reaches the next waiter in p50 <= 1 ms, p99 <= 5 ms (%s): "
        . "p50 %s, p99 %s ms over %d waiters%s", $ok ? 'PASS' : 'FAIL', $r->{label}, slot_ms($r, 'slot50'),
        slot_ms($r, 'slot99'), $r->{slots}, $r->{unknown} ? ", $r->{unknown} told by their check" : '';
}
push @targets, sprintf "    %s a concurrency zone without queueing >= 0.8x a sliding-window zone: %.2fx",
    $ratio >= 0.8 ? 'PASS' : 'FAIL', $ratio;
$report .= "\nTargets:\n\n" . join("\n", @targets) . "\n";
print $report;
open my $f, '>>', $OUT or die "$OUT: $!";
print $f $report;
close $f;
$t->stop_process($_) for @ha;
