#!/usr/bin/perl
# Fault injection: repeated configuration reloads under light load, and the
# Redis side dropping the module's connections repeatedly.
#
# Expected (spec): requests keep being answered through the reloads; old
# workers exit and close their Redis connections (Redis returns to about one
# client per worker); the workers' open file descriptors do not grow; the
# module reconnects after its connection is killed without leaking fds.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use FaultTest;

RateLimitTest::require_module();

my $WORKERS = 2;
my $t = FaultTest->new(workers => $WORKERS);

# ---------------------------------------------------------------------------
# helpers (local to this file)

# Calls $list->() until it returns $want items or $timeout s have passed;
# returns the last list.
sub wait_count {
    my ($list, $want, $timeout) = @_;
    my $deadline = time + $timeout;
    my @l;
    while (1) {
        @l = $list->();
        return @l if @l == $want || time > $deadline;
        sleep 0.1;
    }
}

sub wait_clients { wait_count(sub { $t->redis_clients }, @_) }
sub wait_workers { wait_count(sub { $t->live_workers }, @_) }

# ---------------------------------------------------------------------------

$t->start_redis;
$t->write_conf(<<'EOC');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=200ms;
ratelimit_zone api key=$http_x_api_key limit=3 window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    location /lim/  { ratelimit zone=api; alias %%TMP%%/html/; }
    location /free/ { alias %%TMP%%/html/; }
}
EOC
$t->start_nginx;

my ($up) = $t->wait_passed('lim', 'warm', 3);
ok(defined $up, 'nginx + redis up');
$t->req('lim', "w$_", 3) for 1 .. 20;    # warm both workers
my @w0 = wait_workers($WORKERS, 3);
is(scalar @w0, $WORKERS, "$WORKERS workers");
my @c0 = wait_clients($WORKERS, 3);
is(scalar @c0, $WORKERS, 'redis: one connection per worker before the reloads');
sleep 0.3;
my %fd0 = map { $_ => $t->fd_count($_) } @w0;
my ($fdmax0) = sort { $b <=> $a } values %fd0;
note('fds before: ' . join(', ', map { "$_=$fd0{$_}" } sort keys %fd0));

# --- 10 reloads under light load ----------------------------------------------
{
    my $load = $t->start_load(
        clients => 2, max_seconds => 25, max_requests => 3000, pause => 0.02,
        pick => sub { my ($c, $i) = @_; (($c ? 'free' : 'lim'), "R$c-$i") },
    );
    my $t0 = time;
    for my $i (1 .. 10) {
        $t->reload;
        sleep 0.1;
    }
    note(sprintf '10 reloads in %.1fs', time - $t0);
    sleep 0.5;
    my @rec = $t->finish_load($load);
    note(scalar(@rec) . ' requests during the reloads');

    ok(@rec > 20, 'load ran during the reloads (' . scalar(@rec) . ' requests)');
    my @errs = grep { $_->{err} ne '-' || !$_->{status} } @rec;
    is(scalar @errs, 0, 'reloads: every request answered') or diag(join "\n", map { "$_->{loc} $_->{err}" } @errs[0 .. ($#errs < 9 ? $#errs : 9)]);
    my @bad = grep { $_->{status} != 200 } @rec;
    is(scalar @bad, 0, 'reloads: every request 200 (fail open / unlimited)') or diag(join ' ', map { "$_->{loc}:$_->{status}" } @bad[0 .. ($#bad < 19 ? $#bad : 19)]);
    my @slow = grep { $_->{el} > 2 } @rec;
    is(scalar @slow, 0, 'reloads: no request slower than 2s');
    my %rs;
    $rs{ $_->{rs} }++ for grep { $_->{loc} eq 'lim' } @rec;
    note('statuses on /lim/: ' . join(', ', map { "$_=$rs{$_}" } sort keys %rs));

    my @w1 = wait_workers($WORKERS, 10);
    is(scalar @w1, $WORKERS, 'old workers exited after the reloads') or diag("workers: @w1");
    my %old = map { $_ => 1 } @w0;
    ok(!(grep { $old{$_} } @w1), 'the workers are new ones');

    my @c1 = wait_clients($WORKERS, 5);
    is(scalar @c1, $WORKERS, 'redis: back to one connection per worker (old workers\' connections closed)')
        or diag(join "\n", @c1);

    my ($when) = $t->wait_passed('lim', 'after', 3);
    ok(defined $when, 'after the reloads: PASSED');
    my @s = map { $t->req('lim', 'after-reload')->{status} } 1 .. 4;
    is("@s", '200 200 200 429', 'after the reloads: exact limit');

    sleep 0.3;
    my %fd1 = map { $_ => $t->fd_count($_) } @w1;
    note('fds after: ' . join(', ', map { "$_=" . ($fd1{$_} // '?') } sort keys %fd1));
    for my $p (sort keys %fd1) {
        ok(defined $fd1{$p} && $fd1{$p} <= $fdmax0 + 2, "worker $p: $fd1{$p} fds, not more than before ($fdmax0) + 2");
    }
    @w0 = @w1;
    %fd0 = %fd1;
}

# --- the module's connections killed from the Redis side, 8 times --------------
{
    my $kills = 0;
    for my $i (1 .. 8) {
        my $n = $t->redis('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
        $kills += $n unless RateLimitTest::is_redis_error($n);
        my @c = wait_clients($WORKERS, 3);    # reconnected
        $t->req('lim', "k$i-$_", 3) for 1 .. 4;
    }
    cmp_ok($kills, '>=', 8, "killed the module's connections ($kills kills)");
    my @c = wait_clients($WORKERS, 3);
    is(scalar @c, $WORKERS, 'after CLIENT KILL x8: one connection per worker');
    my ($when) = $t->wait_passed('lim', 'ck', 3);
    ok(defined $when, 'after CLIENT KILL x8: PASSED');
    my @s = map { $t->req('lim', 'after-kill')->{status} } 1 .. 4;
    is("@s", '200 200 200 429', 'after CLIENT KILL x8: exact limit');
    my @w = $t->live_workers;
    is(join(' ', @w), join(' ', @w0), 'same workers (none crashed)');
    sleep 0.3;
    for my $p (@w) {
        my $n = $t->fd_count($p);
        ok(defined $n && $n <= $fd0{$p} + 1, "worker $p: fds $n after reconnects, was $fd0{$p}");
    }
}

$t->throttle_ok('redis problems logged at most once a second per worker');

$t->stop_nginx;
$t->stop_redis;
$t->final_checks;

done_testing;
