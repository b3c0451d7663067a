#!/usr/bin/perl
# Settles (issue 26) across Redis restarts and nginx reloads.
#
# Expected (spec-26 sections 2 and 3):
# - a settle never delays its response;
# - settles made while Redis is not connected wait in the worker's queue and
#   go out when Redis is back (applied, each once);
# - a worker that exits gracefully (a reload) with settles it cannot send
#   drops them, and counts them: nginx_ratelimit_settles_total{outcome="dropped"};
# - Redis killed (SIGKILL; AOF with fsync always, so what it answered is
#   kept) or stopped and started empty, under load: no settle counted twice,
#   so Redis's count never exceeds the reservations and real costs the
#   clients saw, never falls below the reservations admitted plus the units
#   of the settles Redis answered, and every settle has one outcome
#   (applied, dropped, unknown, failed); what Redis holds beyond the answered
#   ones is no more than the unknown settles and the requests failed open
#   could carry;
# - nginx -s reload under load, Redis up: every settle is applied, none
#   twice: Redis holds the real costs of the admitted requests.
#
# Reservations and token counts come from a seed printed at the start
# (RATELIMIT_SEED=N repeats a run).

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use FaultTest qw(raw_get rhdr);
use TokenBackend;
use PromText;

RateLimitTest::require_module();

my $SEED = $ENV{RATELIMIT_SEED} // int(rand(1e6));
diag("random seed: $SEED (RATELIMIT_SEED=$SEED repeats this run)");
srand($SEED);

my $t = FaultTest->new(workers => 2);
my @AOF = ('--appendonly', 'yes', '--appendfsync', 'always');
$t->start_redis(args => \@AOF);
my $RPORT = $t->redis_port;
my $BACKEND = $t->port('BACKEND');
TokenBackend::start($t, $BACKEND, seed => $SEED);

my @ZONES = qw(q1 q2 st ld na rl qx);
$t->write_conf(<<"EOF" . join('', map { <<"LOC" } @ZONES) . "}\n");
ratelimit_redis 127.0.0.1:$RPORT timeout=1s connect_timeout=200ms;
upstream tokens { server 127.0.0.1:$BACKEND; }
${\ join '', map { "ratelimit_zone $_ key=\$http_x_api_key limit=100000000 window=60s;\n" } @ZONES }
server {
    listen 127.0.0.1:%%PORT%% reuseport;
    add_header X-RL-Status "\$ratelimit_status" always;
    add_header X-Reserved "\$arg_max_tokens" always;
    location = /metrics { ratelimit_metrics; }
EOF
    location /$_/ {
        ratelimit zone=$_ cost=\$arg_max_tokens;
        ratelimit_settle zone=$_ \$upstream_http_x_usage_tokens;
        proxy_pass http://tokens;
    }
LOC
$t->start_nginx;

sub redis_t { my $v = $t->redis_window_count($_[0]); return $v // 0 }

sub metric { PromText::value(PromText::scrape($t), @_) }

sub outcomes {
    my ($zone) = @_;
    my $m = PromText::scrape($t);
    return { map { $_ => PromText::value($m, 'nginx_ratelimit_settles_total', zone => $zone, outcome => $_) }
             qw(applied dropped unknown failed) };
}

sub settled { my $o = outcomes($_[0]); return $o->{applied} + $o->{dropped} + $o->{unknown} + $o->{failed} }

# Forked clients, each sending its paths one after another (subject
# X-Api-Key: $key) until finish_clients or `seconds`; one line per request.
sub start_clients {
    my (%o) = @_;
    my $name = $o{name};
    my $stop = $t->tmp . "/stop.$name";
    unlink $stop;
    my @pids;
    for my $c (0 .. $o{clients} - 1) {
        my @paths = map { $o{path_for}->($c, $_) } 0 .. ($o{requests} // 300) - 1;
        my $pid = fork // die "fork: $!";
        if ($pid == 0) {
            open my $fh, '>', $t->tmp . "/$name.$c" or POSIX::_exit(1);
            $fh->autoflush(1);
            my $deadline = time + ($o{seconds} // 20);
            for my $path (@paths) {
                last if -e $stop || time > $deadline;
                my $t0 = time;
                my $r = raw_get($t->port('PORT'), $path, { 'X-Api-Key' => $o{key} }, 5);
                (my $err = $r->{err} || '-') =~ s/\s+/_/g;
                printf {$fh} "%.4f %.4f %d %s %s %s %s\n", $t0, time, $r->{status},
                    rhdr($r, 'X-RL-Status') // '-', rhdr($r, 'X-Reserved') // '-',
                    rhdr($r, 'X-Usage-Tokens') // '-', $err;
            }
            close $fh;
            POSIX::_exit(0);
        }
        $RateLimitTest::Process::CHILDREN{$pid} = 'client';
        push @pids, [ $pid, $c ];
    }
    return { name => $name, stop => $stop, pids => \@pids };
}

sub finish_clients {
    my ($load, $now) = @_;
    if ($now) { open my $fh, '>', $load->{stop} or die "$load->{stop}: $!"; close $fh }
    my @rec;
    for my $p (@{ $load->{pids} }) {
        my ($pid, $c) = @$p;
        my $deadline = time + 20;
        while (waitpid($pid, POSIX::WNOHANG()) == 0) {
            if (time > $deadline) { kill 'KILL', $pid; waitpid($pid, 0); last }
            sleep 0.05;
        }
        delete $RateLimitTest::Process::CHILDREN{$pid};
        open my $fh, '<', $t->tmp . "/$load->{name}.$c" or next;
        while (<$fh>) {
            chomp;
            my ($t0, $t1, $st, $rs, $res, $use, $err) = split / /;
            push @rec, { t0 => $t0, t1 => $t1, el => $t1 - $t0, status => $st, rs => $rs,
                         reserved => $res, used => $use, err => $err };
        }
    }
    return @rec;
}

sub sum { my $s = 0; $s += $_ for @_; $s }

# The sums the clients saw: reservations and real costs of the admitted
# requests, reservations of those failed open.
sub tally {
    my (@rec) = @_;
    my @passed = grep { $_->{rs} eq 'PASSED' } @rec;
    my @error  = grep { $_->{rs} eq 'ERROR' } @rec;
    return (scalar(@passed), sum(map { $_->{reserved} } @passed), sum(map { $_->{used} } @passed),
            scalar(@error), sum(map { $_->{reserved} } @error));
}

# Requests of fresh subjects in zone q1 (reserving 1, using 1: no settle)
# until one is admitted by Redis; the time then, or undef after $timeout s.
sub wait_admitting {
    my ($timeout) = @_;
    my $i = 0;
    return RateLimitTest::wait_until(sub {
        my $r = raw_get($t->port('PORT'), '/q1/warm?max_tokens=1&lo=1&hi=1', { 'X-Api-Key' => 'warm' . $i++ }, 3);
        (rhdr($r, 'X-RL-Status') // '') eq 'PASSED';
    }, $timeout);
}

sub wait_backend_in_flight {
    my ($n, $timeout) = @_;
    return RateLimitTest::wait_until(sub { (TokenBackend::stats($BACKEND)->{in_flight} // 0) >= $n }, $timeout);
}

# --- settles queued while Redis is down go out when it is back ------------------------------

{
    # max_tokens=10 reserved, 100..200 used: every settle adds.
    my $load = start_clients(name => 'q1', key => 'q1', clients => 6, requests => 1,
        path_for => sub { '/q1/chat?max_tokens=10&lo=100&hi=200&hold=1500' });
    ok(wait_backend_in_flight(6, 5), 'queued: six requests admitted and at the upstream');
    is(redis_t('rl:q1:q1'), 60, 'queued: Redis holds their reservations (6 x 10)');
    $t->stop_redis;
    my $down = time;
    my @rec = finish_clients($load);
    is(join(' ', map { "$_->{status}/$_->{rs}" } @rec), join(' ', ('200/PASSED') x 6),
       'queued: six answered 200, admitted before Redis stopped');
    ok(!(grep { $_->{el} > 2.5 } @rec), 'queued: answered without waiting for Redis (under 2.5 s for a 1.5 s upstream)')
        or diag(join ' ', map { sprintf '%.2f', $_->{el} } @rec);
    sleep 0.3;
    my $o = outcomes('q1');
    is("$o->{applied} $o->{dropped} $o->{unknown} $o->{failed}", '0 0 0 0', 'queued: nothing sent while Redis is down');
    $t->start_redis(port => $RPORT, args => \@AOF);
    my (undef, $reserved, $used) = tally(@rec);
    RateLimitTest::wait_until(sub { settled('q1') >= 6 }, 5);
    $o = outcomes('q1');
    is("$o->{applied} $o->{dropped} $o->{unknown} $o->{failed}", '6 0 0 0', 'queued: the six settles applied once Redis is back');
    is(redis_t('rl:q1:q1'), $used, "queued: Redis (restarted from its AOF) holds the tokens used ($used)");
    is(metric('nginx_ratelimit_units_total', zone => 'q1', event => 'settle_added'), $used - $reserved,
       'queued: metrics: units added by settles');
    is(metric('nginx_ratelimit_units_total', zone => 'q1', event => 'admitted'), $reserved,
       'queued: metrics: units admitted, the reservations');
}

# --- a worker's graceful exit with settles it cannot send: dropped, counted ---------------

{
    ok(wait_admitting(5), 'dropped: Redis answering again');
    my $load = start_clients(name => 'q2', key => 'q2', clients => 6, requests => 1,
        path_for => sub { '/q2/chat?max_tokens=10&lo=100&hi=200&hold=1000' });
    ok(wait_backend_in_flight(6, 5), 'dropped: six requests admitted and at the upstream');
    $t->stop_redis;
    my @rec = finish_clients($load);
    is(join(' ', map { "$_->{status}/$_->{rs}" } @rec), join(' ', ('200/PASSED') x 6), 'dropped: six admitted');
    my @old = $t->live_workers;
    my $t0 = time;
    kill 'HUP', $t->nginx_pid;
    my $gone = RateLimitTest::wait_until(sub { my %w = map { $_ => 1 } $t->live_workers; !(grep { $w{$_} } @old) }, 8);
    ok($gone, 'dropped: the old workers exited with Redis down');
    # A graceful exit waits for its settles at most twice `timeout` (docs/directives.md,
    # ratelimit_settle): the drain timer sees the exit on its next tick,
    # within one timeout, and gives the answers one more.
    ok($gone && $gone - $t0 < 2.7, sprintf('dropped: they exited within 2 x timeout=1s and 0.7 s of slack (%.2f s)', ($gone // 99) - $t0));
    RateLimitTest::wait_until(sub { $t->count_log(qr/start worker process \d+/) >= 6 }, 3);
    RateLimitTest::wait_until(sub { settled('q2') >= 6 }, 3);
    my $o = outcomes('q2');
    is("$o->{applied} $o->{dropped} $o->{unknown} $o->{failed}", '0 6 0 0',
       'dropped: the six queued settles counted as dropped at exit');
    like($t->error_log, qr/\[(?:warn|error)\][^\n]*ratelimit: [^\n]*settle/i, 'dropped: the error log says so');
    $t->start_redis(port => $RPORT, args => \@AOF);
    my (undef, $reserved) = tally(@rec);
    sleep 1;
    is(redis_t('rl:q2:q2'), $reserved, "dropped: Redis holds the reservations only ($reserved)");
    is(outcomes('q2')->{applied}, 0, 'dropped: never sent later');
}

# --- Redis stalled (SIGSTOP) with settles sent, then killed: unknown, never sent again --------

my $STOPPED;
END { kill 'CONT', $STOPPED if $STOPPED }
{
    ok(wait_admitting(5), 'stall: Redis answering again');
    my $load = start_clients(name => 'st', key => 'st', clients => 4, requests => 1,
        path_for => sub { '/st/chat?max_tokens=10&lo=100&hi=200&hold=600' });
    ok(wait_backend_in_flight(4, 5), 'stall: four requests admitted and at the upstream');
    my $rpid = $t->redis_pid;
    kill 'STOP', $rpid;
    $STOPPED = $rpid;
    my @rec = finish_clients($load);
    is(join(' ', map { "$_->{status}/$_->{rs}" } @rec), join(' ', ('200/PASSED') x 4), 'stall: four admitted');
    ok(!(grep { $_->{el} > 1.5 } @rec), 'stall: answered without waiting for the stalled Redis')
        or diag(join ' ', map { sprintf '%.2f', $_->{el} } @rec);
    sleep 1.5;    # past timeout=1s: their settles went out, unanswered
    is(outcomes('st')->{applied}, 0, 'stall: no settle answered by a stopped Redis');
    # Killed while stopped: what it had not read is lost (AOF: what it had
    # answered is kept), the connections with it.
    kill 'KILL', $rpid;
    $STOPPED = undef;
    $t->stop_redis;
    RateLimitTest::wait_until(sub { settled('st') >= 4 }, 3);
    $t->start_redis(port => $RPORT, args => \@AOF);
    ok(wait_admitting(5), 'stall: Redis answering after the restart');
    RateLimitTest::wait_until(sub { settled('st') >= 4 }, 3);
    sleep 1;
    my $o = outcomes('st');
    note("stall: settles $o->{applied} applied, $o->{dropped} dropped, $o->{unknown} unknown, $o->{failed} failed");
    is($o->{applied} + $o->{unknown}, 4, 'stall: each settle applied or unknown');
    is($o->{dropped} + $o->{failed}, 0, 'stall: none dropped or failed');
    my (undef, $reserved, $used) = tally(@rec);
    my $have = redis_t('rl:st:st');
    # Redis was stopped before they were made: it never read the settles
    # that went out; what it holds beyond the reservations is the answered
    # ones, sent (again or for the first time) after the restart.
    my $added = metric('nginx_ratelimit_units_total', zone => 'st', event => 'settle_added');
    is($have, $reserved + $added, "stall: Redis holds the reservations and the applied settles ($reserved + $added): "
        . 'no unknown settle sent again');
    if ($o->{unknown}) {
        like($t->error_log, qr/ratelimit: [^\n]*settle[^\n]*zone "st"[^\n]*not answered/, 'stall: the error log says so');
    }
    else {
        pass('stall: (no settle of unknown outcome, no line owed)');
    }
}

# Checks of a run under load on zone $zone, subject $key: each settle has one
# outcome, none counted twice.  $lower: the least Redis must hold (undef:
# reservations admitted + units of the answered settles).
sub check_run {
    my ($what, $zone, $key, $rec, %o) = @_;
    my @rec = @$rec;
    my ($np, $res_p, $used_p, $ne, $res_e) = tally(@rec);
    note(sprintf '%s: %d requests, %d admitted (reserved %d, used %d), %d failed open (reserved %d)',
        $what, scalar @rec, $np, $res_p, $used_p, $ne, $res_e);
    my @bad = grep { $_->{err} ne '-' || $_->{status} != 200 || ($_->{rs} ne 'PASSED' && $_->{rs} ne 'ERROR') } @rec;
    is(scalar @bad, 0, "$what: every request answered 200, PASSED or failed open")
        or diag(join "\n", map { "$_->{status} $_->{rs} $_->{err}" } @bad[0 .. ($#bad < 9 ? $#bad : 9)]);
    ok($np > 20, "$what: requests admitted ($np)");
    RateLimitTest::wait_until(sub { settled($zone) >= $np }, 8);
    my $o = outcomes($zone);
    note("$what: settles $o->{applied} applied, $o->{dropped} dropped, $o->{unknown} unknown, $o->{failed} failed");
    is($o->{applied} + $o->{dropped} + $o->{unknown} + $o->{failed}, $np,
       "$what: one outcome for each of the $np settles");
    my $have = redis_t("rl:$zone:$key");
    my $added = metric('nginx_ratelimit_units_total', zone => $zone, event => 'settle_added');
    ok($have <= $used_p + $res_e, "$what: no settle counted twice: Redis ($have) <= used by the admitted + reserved by the failed open ($used_p + $res_e)");
    my $lower = $o{lower} // $res_p + $added;
    ok($have >= $lower, "$what: Redis ($have) >= " . ($o{lower_what} // 'reservations admitted + units of the answered settles') . " ($lower)");
    my $max_delta = 0;
    for (@rec) { $max_delta = $_->{used} - $_->{reserved} if $_->{rs} eq 'PASSED' && $_->{used} - $_->{reserved} > $max_delta }
    if (!defined $o{lower}) {
        my $slack = $have - $res_p - $added;
        ok($slack <= $res_e + $o->{unknown} * $max_delta,
           "$what: beyond the answered settles, Redis holds no more than the failed open and the unknown settles could carry ($slack <= $res_e + $o->{unknown} x $max_delta)");
        is(metric('nginx_ratelimit_units_total', zone => $zone, event => 'admitted'), $res_p,
           "$what: metrics: units admitted, the reservations of the admitted requests");
    }
    return $o;
}

sub load_paths {
    my ($zone) = @_;
    return sub {
        my $r = 10 + int(rand(31));
        my $hold = 50 + int(rand(201));
        return "/$zone/chat?max_tokens=$r&lo=" . ($r + 50) . '&hi=' . ($r + 150) . "&hold=$hold";
    };
}

# --- Redis killed under load (AOF), started again on the same port ---------------------------

{
    ok(wait_admitting(5), 'kill: Redis answering again');
    my $load = start_clients(name => 'ld', key => 'ld', clients => 4, path_for => load_paths('ld'));
    sleep 1.5;
    my $pid = $t->redis_pid;
    kill 'KILL', $pid;
    $t->stop_redis;    # reaps it
    sleep 1.0;
    $t->start_redis(port => $RPORT, args => \@AOF);
    sleep 2.0;
    my @rec = finish_clients($load, 1);
    my $o = check_run('kill (AOF)', 'ld', 'ld', \@rec);
    is($o->{dropped} + $o->{failed}, 0, 'kill (AOF): no settle dropped or failed: those not sent waited for Redis');
}

# --- Redis stopped under load, started empty (no AOF) --------------------------------------------

{
    my $load = start_clients(name => 'na', key => 'na', clients => 4, path_for => load_paths('na'));
    sleep 1.5;
    $t->stop_redis;
    sleep 0.8;
    $t->start_redis(port => $RPORT);    # no AOF: empty
    my $up = time;
    is($t->redis('DBSIZE'), 0, 'empty restart: Redis starts empty');
    sleep 2.0;
    my @rec = finish_clients($load, 1);
    my @after = grep { $_->{rs} eq 'PASSED' && $_->{t0} > $up } @rec;
    my $lower = sum(map { $_->{reserved} } @after);
    check_run('empty restart', 'na', 'na', \@rec, lower => $lower,
              lower_what => 'reservations admitted by the new Redis (' . scalar(@after) . ' requests)');
}

# --- nginx -s reload under load, Redis up --------------------------------------------------------

{
    ok(wait_admitting(5), 'reload: Redis answering');
    my $load = start_clients(name => 'rl', key => 'rl', clients => 4, path_for => load_paths('rl'));
    sleep 0.8;
    # and four long ones, in flight at the first reload: their settles are
    # made by workers that are exiting
    my $long = start_clients(name => 'rlong', key => 'rl', clients => 4, requests => 1,
        path_for => sub { '/rl/chat?max_tokens=10&lo=100&hi=200&hold=1200' });
    sleep 0.3;    # admitted, held 1.2 s at the upstream
    my @old = $t->live_workers;
    for (1 .. 3) {
        $t->reload;
        sleep 0.5;
    }
    sleep 1.0;
    my @rec = (finish_clients($long), finish_clients($load, 1));
    my %now = map { $_ => 1 } $t->live_workers;
    ok(!(grep { $now{$_} } @old), 'reload: the first workers have exited');
    my $o = check_run('reload', 'rl', 'rl', \@rec);
    is("$o->{dropped} $o->{unknown} $o->{failed}", '0 0 0', 'reload: every settle applied (old workers sent theirs before exiting)');
    my ($np, $res_p, $used_p, $ne, $res_e) = tally(@rec);
    my $have = redis_t('rl:rl:rl');
    ok($have >= $used_p && $have <= $used_p + $res_e,
       "reload: Redis holds the tokens used by the admitted requests ($have, used $used_p, $ne failed open)");
}

# The lines about lost settles have a throttle of their own: at most one a
# second per worker, beside the Redis problems' one.
my $SETTLE_LINE = qr/ratelimit: [^\n]*settle/;
$t->throttle_ok('settle faults: redis problems logged at most once a second per worker', $SETTLE_LINE);
{
    my %n;
    for (split /\n/, $t->error_log) {
        $n{"$2 $1"}++ if m{^(\S+ \S+) \[(?:warn|error)\] (\d+)#\d+: (?:\*\d+ )?ratelimit: [^\n]*settle};
    }
    my @over = grep { $n{$_} > 1 } sort keys %n;
    ok(!@over, 'settle faults: lost settles logged at most once a second per worker')
        or diag(join ', ', @over);
}
# --- nginx stopped gracefully (QUIT) with requests in flight: their settles go out -------------

{
    ok(wait_admitting(5), 'quit: Redis answering');
    my $load = start_clients(name => 'qx', key => 'qx', clients => 4, requests => 1,
        path_for => sub { '/qx/chat?max_tokens=10&lo=100&hi=200&hold=800' });
    ok(wait_backend_in_flight(4, 5), 'quit: four requests admitted and at the upstream');
    ok($t->stop_nginx(10), 'quit: nginx stopped gracefully');
    my @rec = finish_clients($load);
    is(join(' ', map { "$_->{status}/$_->{rs}" } @rec), join(' ', ('200/PASSED') x 4), 'quit: the four answered');
    my (undef, $reserved, $used) = tally(@rec);
    is(redis_t('rl:qx:qx'), $used, "quit: their settles sent before the workers exited ($used)");
}

$t->final_checks('settle faults: no [alert] or [emerg]');

done_testing;
