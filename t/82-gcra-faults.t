#!/usr/bin/perl
# GCRA zones when Redis fails (issue 27): Redis stalled (SIGSTOP) or down
# while requests wait for their turn or for Redis; clients that leave while
# their request waits.  One worker, so that a blocked worker would show on
# the plain location beside the limited ones.
#
# Zone: rate=2r/s (emission interval T = 500 ms, longer than the Redis
# `timeout` of 100 ms plus the margin, so a wait for a turn cannot pass for
# a wait for Redis), burst=4: 5 requests at once wait 0, 0.5, 1, 1.5 and 2 s.
#
# Expected (spec-27 "nginx side", docs/operations.md on the fail policy):
# - a request already admitted waits on its timer, not on Redis: Redis
#   stalled or killed meanwhile, it is answered at its delay (never before
#   it, never past it + MARGIN);
# - a request that meets a stalled Redis waits at most `timeout`, then gets
#   the fail policy: open, passed at once (no wait for a turn: no verdict),
#   $ratelimit_status ERROR; closed, 503; Redis down: the same, at once;
# - a request Redis answers late (stalled 80 ms, under `timeout`) waits
#   for Redis, then its turn: never past its delay + timeout + MARGIN;
# - no request at all waits past its delay + `timeout` + MARGIN;
# - the worker never blocks: a location without a limit answers within
#   250 ms throughout, every 20 ms;
# - a client that leaves while its request waits for its turn is not waited
#   for: the request is finalized at once (499 in the access log, its
#   $request_time the time the client stayed), its timer never fires later
#   (one log line), the connection is closed (the worker's descriptors come
#   back), nothing crashes; a client that leaves while its request waits
#   for a stalled Redis costs nothing either;
# - Redis refusing writes (maxmemory reached): the fail policy at once, no
#   wait for a turn;
# - after Redis comes back, verdicts are Redis's again;
# - $ratelimit_delay ("milliseconds a request ... waited for its turn")
#   of a request whose client left is no more than the request lasted.
#
# MARGIN: 150 ms (a shared 2-core machine; timers and the scheduler).

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use FaultTest qw(sr rhdr);
use RateLimitTest::Env qw(_read_file);
use GcraTest qw(play);

RateLimitTest::require_module();

my $T       = 0.5;
my $TIMEOUT = 0.1;
my $MARGIN  = 0.15;

my $t = FaultTest->new(workers => 1);
$t->start_redis;
my $REDIS_PID;    # stopped: continued at the end whatever happens
END { kill 'CONT', $REDIS_PID if $REDIS_PID }

$t->write_conf(<<'EOC');
log_format faults '$http_x_id $status rs=$ratelimit_status rd=$ratelimit_delay rt=$request_time';
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=100ms;
ratelimit_zone g key=$http_x_api_key rate=2r/s algorithm=gcra;
server {
    listen 127.0.0.1:%%PORT%%;
    access_log %%TMP%%/access.log rltest;
    access_log %%TMP%%/faults.log faults;
    add_header X-RL-Status "$ratelimit_status" always;
    add_header X-RL-Delay "$ratelimit_delay" always;
    location /open/   { ratelimit zone=g burst=4; alias %%TMP%%/html/; }
    location /closed/ { ratelimit zone=g burst=4; ratelimit_fail closed; alias %%TMP%%/html/; }
    location /free/   { alias %%TMP%%/html/; }
}
EOC
$t->start_nginx;
my ($up) = $t->wait_passed('open', 'warm', 3);
ok(defined $up, 'Redis up: PASSED');
my @workers = $t->live_workers;

my $N = 0;
sub req {
    my ($at, $loc, $key, %o) = @_;
    my $id = $o{id} // 'r' . $N++;
    return { at => $at, port => $t->port, path => "/$loc/index.html",
             headers => { 'X-Api-Key' => $key, 'X-Id' => $id }, id => $id, loc => $loc, %o };
}

# /free/ every 20 ms from $from to $to
sub free_load {
    my ($from, $to) = @_;
    my @p;
    for (my $x = $from; $x < $to; $x += 0.02) { push @p, req($x, 'free', 'free', kind => 'free') }
    return @p;
}

# Signals to Redis at offsets from $start, from a helper process, so that
# they land while play() keeps its requests going.
sub signal_plan {
    my ($start, @steps) = @_;
    my $pid = $t->redis_pid;
    return $t->start_child('redis signals', sub {
        for my $s (@steps) {
            my ($at, $sig) = @$s;
            my $w = $start + $at - time;
            sleep $w if $w > 0;
            kill $sig, $pid;
        }
    });
}

sub faults_log {
    my %l;
    for (split /\n/, _read_file($t->tmp . '/faults.log')) {
        next unless /^(\S+) (\d+) rs=(\S+) rd=(\S+) rt=([\d.]+)$/;
        push @{ $l{$1} }, { status => $2, rs => $3, rd => $4, rt => $5 };
    }
    return \%l;
}

sub rs { $_[0]{rheaders}{'x-rl-status'} // '-' }
sub el { $_[0]{done} - $_[0]{sent} }
sub show { join ', ', map { sprintf '%s %s %s/%s %.0fms%s', $_->{id}, $_->{loc}, $_->{err} || $_->{status}, rs($_),
    el($_) * 1000, defined $_->{delay} ? sprintf(' (delay %.0f)', $_->{delay} * 1000) : '' } @_ }

# The checks every phase shares.
sub common_checks {
    my ($name, @r) = @_;
    my @bad = grep { $_->{err} || !$_->{status} } @r;
    is(scalar @bad, 0, "$name: every request answered") or diag(show(@bad[0 .. ($#bad < 9 ? $#bad : 9)]));
    my @limited = grep { $_->{kind} ne 'free' } @r;
    my @over = grep { el($_) > ($_->{delay} // 0) + $TIMEOUT + $MARGIN } @limited;
    is(scalar @over, 0, sprintf '%s: no limited request (%d) waited past its delay + timeout + %d ms', $name,
        scalar @limited, $MARGIN * 1000) or diag(show(@over));
    my @free = grep { $_->{kind} eq 'free' } @r;
    my ($fmax) = sort { $b <=> $a } map { el($_) } @free;
    my @fbad = grep { $_->{status} != 200 } @free;
    ok(@free > 20 && !@fbad && $fmax < 0.25, sprintf '%s: the plain location answered %d requests, 200, within 250 ms (slowest %.0f ms): the worker never blocked',
        $name, scalar @free, ($fmax // 0) * 1000);
}

# --- Redis stalled while requests wait for their turn, and for Redis -------------

{
    my $start = time + 0.3;
    my @plan;
    # admitted before the stall: 5 at once per location, their turns 0.5 s apart
    # (10 ms apart: each turn is T after the first, less its send offset)
    for my $i (0 .. 4) {
        push @plan, req(0.01 * $i, 'open', 'turns-open', kind => 'turn', delay => $i * ($T - 0.01), n => $i);
        push @plan, req(0.01 * $i + 0.005, 'closed', 'turns-closed', kind => 'turn', delay => $i * ($T - 0.01), n => $i);
    }
    # during the stall (0.2 .. 2.7 s): fresh subjects and the waiting ones
    for my $k (0 .. 9) {
        my $at = 0.3 + 0.22 * $k;
        push @plan, req($at, 'open', "stall-open-$k", kind => 'stall');
        push @plan, req($at + 0.05, 'closed', "stall-closed-$k", kind => 'stall');
        push @plan, req($at + 0.1, 'open', 'turns-open', kind => 'stall');
    }
    # one that leaves while it waits for Redis
    push @plan, req(0.5, 'open', 'stall-leaver', kind => 'stall', id => 'stall-leaver', leave => 0.03);
    push @plan, free_load(0, 3.2);
    signal_plan($start, [0.2, 'STOP'], [2.7, 'CONT']);
    $REDIS_PID = $t->redis_pid;
    my @r = play(\@plan, start => $start, timeout => 6, leave => sub { $_[0]{leave} });
    $REDIS_PID = undef;

    common_checks('stall', grep { $_->{id} ne 'stall-leaver' } @r);

    my @turn = sort { $a->{n} <=> $b->{n} } grep { $_->{kind} eq 'turn' } @r;
    my @tbad = grep { $_->{status} != 200 || rs($_) ne 'PASSED' || el($_) < $_->{delay} - 0.005
        || el($_) > $_->{delay} + $MARGIN } @turn;
    is(scalar @tbad, 0, 'stall: requests admitted before it were answered at their turns (0 .. 2 s), Redis stopped meanwhile, open and closed alike')
        or diag(show(@tbad));
    my @hd = map { $_->{rheaders}{'x-rl-delay'} // '-' } grep { $_->{loc} eq 'open' } @turn;
    my @hbad = grep { $hd[$_] !~ /^\d+$/ || abs($hd[$_] - $_ * ($T - 0.01) * 1000) > 5 } 0 .. 4;
    ok(@hd == 5 && !@hbad, "stall: their \$ratelimit_delay: @hd (0, 490, 980, 1470, 1960 +- 5)");

    my @so = grep { $_->{kind} eq 'stall' && $_->{loc} eq 'open' && $_->{id} ne 'stall-leaver' } @r;
    my @sc = grep { $_->{kind} eq 'stall' && $_->{loc} eq 'closed' } @r;
    is(join(' ', sort { $a cmp $b } keys %{{ map { ($_->{status} . '/' . rs($_) . '/' . ($_->{rheaders}{'x-rl-delay'} // '-')) => 1 } @so }}),
        '200/ERROR/-', 'stall: fail open: passed, ERROR, no $ratelimit_delay');
    is(join(' ', sort keys %{{ map { ($_->{status} . '/' . rs($_)) => 1 } @sc }}), '503/ERROR', 'stall: fail closed: 503, ERROR');
    my @waited_turn = grep { el($_) > $TIMEOUT + $MARGIN } @so;
    is(scalar @waited_turn, 0, sprintf 'stall: fail open waits for no turn (slowest %.0f ms)',
        (sort { $b <=> $a } map { el($_) * 1000 } @so)[0] // 0) or diag(show(@waited_turn));
    # the first of them did wait for Redis: it was asked, and stalled
    my @early = grep { $_->{at} < 1.5 } @so, @sc;
    my ($emin) = sort { $a <=> $b } map { el($_) } @early;
    cmp_ok($emin // 0, '>=', $TIMEOUT * 0.8, sprintf 'stall: in its first second requests waited for Redis\'s timeout (fastest %.0f ms)',
        ($emin // 0) * 1000);

    my ($left) = grep { $_->{id} eq 'stall-leaver' } @r;
    is($left->{err}, 'left', 'stall: a client left while its request waited for Redis');

    my ($when) = $t->wait_passed('open', 'after-stall', 4);
    ok(defined $when, 'after SIGCONT: PASSED again');
    my $log = faults_log();
    my @ll = @{ $log->{'stall-leaver'} // [] };
    is(scalar @ll, 1, 'stall: the request whose client left is logged once') or diag(scalar @ll);
    ok(@ll && $ll[0]{rt} <= $TIMEOUT + $MARGIN, sprintf 'stall: ... finalized within timeout + margin (%s s, status %s)',
        $ll[0]{rt} // '-', $ll[0]{status} // '-');
}

# --- Redis answering late (80 ms stall, under timeout): Redis's wait, then the turn ----

{
    my $start = time + 0.3;
    my @plan = map { req(0.01, 'open', 'late', kind => 'late', delay => $_ * $T, n => $_) } 0 .. 2;
    push @plan, free_load(0, 1.3);
    signal_plan($start, [0.0, 'STOP'], [0.08, 'CONT']);
    $REDIS_PID = $t->redis_pid;
    my @r = play(\@plan, start => $start, timeout => 5);
    $REDIS_PID = undef;
    common_checks('late', @r);
    my @late = sort { $a->{n} <=> $b->{n} } grep { $_->{kind} eq 'late' } @r;
    is(join(' ', map { $_->{status} . '/' . rs($_) } @late), '200/PASSED 200/PASSED 200/PASSED', 'late: Redis answered (under timeout): PASSED');
    my @lbad = grep { el($_) < $_->{delay} || el($_) > $_->{delay} + $TIMEOUT + $MARGIN } @late;
    is(scalar @lbad, 0, 'late: each waited for Redis, then its turn: between its delay and delay + timeout + margin')
        or diag(show(@late));
}

# --- Redis down while requests wait for their turn ------------------------------------

{
    my $start = time + 0.3;
    my @plan = map { req(0, 'open', 'down-turns', kind => 'turn', delay => $_ * $T, n => $_) } 0 .. 4;
    for my $k (0 .. 7) {
        push @plan, req(0.4 + 0.2 * $k, 'open', "down-open-$k", kind => 'down');
        push @plan, req(0.45 + 0.2 * $k, 'closed', "down-closed-$k", kind => 'down');
    }
    push @plan, free_load(0, 2.3);
    # SIGKILL: gone at once, as a crash
    signal_plan($start, [0.25, 'KILL']);
    my @r = play(\@plan, start => $start, timeout => 6);
    $t->stop_redis;    # reaped
    common_checks('down', @r);
    my @turn = sort { $a->{n} <=> $b->{n} } grep { $_->{kind} eq 'turn' } @r;
    my @tbad = grep { $_->{status} != 200 || rs($_) ne 'PASSED' || el($_) < $_->{delay} - 0.005
        || el($_) > $_->{delay} + $MARGIN } @turn;
    is(scalar @tbad, 0, 'down: requests admitted before Redis died were answered at their turns') or diag(show(@turn));
    my @d = grep { $_->{kind} eq 'down' } @r;
    is(join(' ', sort keys %{{ map { ($_->{loc} . ' ' . $_->{status} . '/' . rs($_)) => 1 } @d }}),
        'closed 503/ERROR open 200/ERROR', 'down: fail open 200 ERROR, fail closed 503 ERROR');
    my ($dmax) = sort { $b <=> $a } map { el($_) } @d;
    cmp_ok($dmax, '<', $TIMEOUT + $MARGIN, sprintf 'down: answered within timeout + margin (slowest %.0f ms)', $dmax * 1000);

    $t->start_redis(port => $t->redis_port);
    my ($when) = $t->wait_passed('open', 'after-down', 5);
    ok(defined $when, 'Redis restarted: PASSED again');
    my @v = map { $t->req('open', 'fresh') } 1 .. 2;
    my @vd = map { rhdr($_, 'X-RL-Delay') // '-' } @v;
    ok(sr($v[0]) eq '200/PASSED' && sr($v[1]) eq '200/PASSED' && $vd[0] eq '0' && $vd[1] =~ /^\d+$/
        && $vd[1] > 450 && $vd[1] <= 500,
        "Redis restarted: a fresh subject's turns again: 0, then 500 ms less the time between (@vd)");
}

# --- Redis refusing writes (maxmemory reached, noeviction) ---------------------------

{
    is($t->redis('CONFIG', 'SET', 'maxmemory-policy', 'noeviction'), 'OK', 'oom: noeviction');
    is($t->redis('CONFIG', 'SET', 'maxmemory', '1'), 'OK', 'oom: maxmemory 1 byte (every write refused)');
    my $start = time + 0.3;
    my @plan = map { (req(0.01 * $_, 'open', 'oom-open', kind => 'oom'), req(0.01 * $_ + 0.005, 'closed', 'oom-closed', kind => 'oom')) } 0 .. 4;
    push @plan, free_load(0, 0.6);
    my @r = play(\@plan, start => $start, timeout => 5);
    $t->redis('CONFIG', 'SET', 'maxmemory', '0');
    common_checks('oom', @r);
    my @o = grep { $_->{kind} eq 'oom' } @r;
    is(join(' ', sort keys %{{ map { ($_->{loc} . ' ' . $_->{status} . '/' . rs($_) . '/' . ($_->{rheaders}{'x-rl-delay'} // '-')) => 1 } @o }}),
        'closed 503/ERROR/- open 200/ERROR/-', 'oom: 5 at once: fail open 200 ERROR and fail closed 503 ERROR, none waits for a turn');
    my ($omax) = sort { $b <=> $a } map { el($_) } @o;
    cmp_ok($omax, '<', $TIMEOUT + $MARGIN, sprintf 'oom: answered at once (slowest %.0f ms)', $omax * 1000);
    my @v = map { $t->req('open', 'after-oom') } 1 .. 2;
    is(join(' ', map { sr($_) . '/' . (rhdr($_, 'X-RL-Delay') // '-') } @v) =~ s{/(49\d|500)$}{/500}r, '200/PASSED/0 200/PASSED/500',
        'oom: writes allowed again: turns again');
}

# --- a client that leaves while its request waits for its turn -------------------------

{
    my $w = $workers[0];
    my $fds0 = $t->fd_count($w);
    my $start = time + 0.3;
    # turns 0, 0.5, 1, 1.5, 2 s after the first (sent 10 ms apart); the
    # clients of the 1.5 s and 2 s ones leave after 0.3 s; the 1 s one stays
    my @plan = map { req(0.01 * $_, 'open', 'leaver', kind => 'turn', delay => $_ * ($T - 0.01), n => $_,
        id => "leave-$_", ($_ >= 3 ? (leave => 0.3) : ())) } 0 .. 4;
    push @plan, free_load(0, 1.5);
    my @r = play(\@plan, start => $start, timeout => 5, leave => sub { $_[0]{leave} });
    my %by = map { ($_->{id} => $_) } @r;
    is(join(' ', map { $by{"leave-$_"}{err} || $by{"leave-$_"}{status} } 0 .. 4), '200 200 200 left left',
        'leave: the clients of the 1.5 s and 2 s turns left after 0.3 s, the others were answered');
    ok(el($by{'leave-2'}) >= 0.975 && el($by{'leave-2'}) <= 0.98 + $MARGIN,
        sprintf 'leave: the 1 s turn was still answered at its turn (%.0f ms)', el($by{'leave-2'}) * 1000);
    common_checks('leave', grep { !$_->{leave} } @r);

    # logged at once, not at their turns
    my $log;
    my $seen = RateLimitTest::wait_until(sub { $log = faults_log(); $log->{'leave-3'} && $log->{'leave-4'} }, 0.5);
    ok($seen, 'leave: both requests whose clients left are in the access log');
    for my $n (3, 4) {
        my ($e) = @{ $log->{"leave-$n"} // [{}] };
        ok(($e->{status} // '') eq '499' && ($e->{rt} // 9) < 0.3 + $MARGIN,
            sprintf 'leave: the %.1f s turn: 499 after %s s (the time its client stayed)', $n * $T, $e->{rt} // '-');
        # "$ratelimit_delay: milliseconds a request ... waited for its turn"
        ok(defined $e->{rd} && $e->{rd} =~ /^\d+$/ && $e->{rd} <= ($e->{rt} // 0) * 1000 + 1,
            sprintf 'leave: the %.1f s turn: $ratelimit_delay (%s) is no more than the request lasted (%s s)',
            $n * $T, $e->{rd} // '-', $e->{rt} // '-');
    }
    # past their turns: their timers never fire
    sleep 2.3 - (time - $start) if time - $start < 2.3;
    $log = faults_log();
    is(join(' ', map { scalar @{ $log->{"leave-$_"} // [] } } 0 .. 4), '1 1 1 1 1', 'leave: each request logged once, past their turns too');
    my $fds = $t->fd_count($w);
    ok(defined $fds && defined $fds0 && $fds <= $fds0, sprintf 'leave: the worker\'s descriptors came back (%s before, %s after)',
        $fds0 // '-', $fds // '-');
    my $f = $t->req('free', 'after');
    is($f->{status}, 200, 'leave: the worker still serves');
}

is(join(' ', $t->live_workers), join(' ', @workers), 'the worker never crashed (same pid throughout)');
$t->stop_and_check('gcra faults');
done_testing;
