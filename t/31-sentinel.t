#!/usr/bin/perl
# Redis Sentinel: ratelimit_redis S1 S2 S3 sentinel=mymaster, two nginx
# servers (two workers each) on one master + one replica + three sentinels,
# through a SIGKILL of the master, a SENTINEL FAILOVER back, and a hung
# (SIGSTOPped) master, under load; then with two of the sentinels hung.
#
# Expected (spec): the master is discovered through the sentinels (one
# notice "redis master "mymaster" is at IP:PORT" per worker); after a
# failover each worker follows the new master without restart or reload and
# logs exactly one warning "redis master "mymaster" moved from IP:PORT to
# IP:PORT" per switch; no request waits longer than `timeout` (+ 50 ms); a
# hammer on one fresh key from both servers admits exactly the limit again
# within 3 s of the promotion; discovery goes on to the next sentinel when
# one hangs; no [alert], no crashed worker.  With
# requirepass on the sentinels (sentinel_password=) and on the data nodes
# (password=) limiting works; a wrong secret gives the fail policy and a log
# line without the secret; a "master" that answers ROLE as a replica is not
# used; a master turned replica (-READONLY) sends the workers back to the
# sentinels.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use FaultTest qw(raw_get rhdr sr);
use RateLimitTest qw(fail_policy_http);
use SentinelTest;

RateLimitTest::require_module();

my $WORKERS = 2;
my $LIMIT = 5;
my $TIMEOUT = 0.1;       # timeout=100ms
my $LATE = 0.05;         # the spec's bound: timeout + 50 ms
my $t1 = FaultTest->new(workers => $WORKERS);
my $t2 = FaultTest->new(workers => $WORKERS);
my @T = ($t1, $t2);

my $s = SentinelTest->new($t1, down_after => 500, failover_timeout => 3000);
my $t_start = time;
$s->start;
ok($s->wait_ready(15), sprintf('sentinels ready (replica and each other known) after %.1fs', time - $t_start));
my ($PA, $PB) = ($s->port('A'), $s->port('B'));
my $SENT = join ' ', map { "127.0.0.1:$_" } $s->sentinel_ports;
is($s->master_addr(0), "127.0.0.1:$PA", 'the sentinels say A is the master');

sub conf {
    my ($t, $redis_line) = @_;
    my $ms = int($TIMEOUT * 1000);
    $t->write_conf(fail_policy_http($redis_line, limit => $LIMIT));
}

# $n concurrent requests for one key, alternately to each server: "passed/rejected/other".
sub hammer {
    my ($key, $n) = @_;
    return $t1->hammer(\@T, $n, '/closed/index.html', { 'X-Api-Key' => $key });
}

my $EXACT = "$LIMIT/5/0";
# Hammers fresh keys until one is exact; the time it was, or undef after $secs.
sub wait_exact {
    my ($tag, $secs) = @_;
    my $deadline = time + $secs;
    my ($i, $last) = (0, '');
    while (time < $deadline) {
        my $t0 = time;
        $last = hammer("$tag-" . $i++, $LIMIT + 5);
        return ($t0, $last, $i) if $last eq $EXACT;
        sleep 0.1;
    }
    return (undef, $last, $i);
}

# error-log lines matching $re, counted per worker pid
sub per_pid {
    my ($t, $re) = @_;
    my %n;
    for (split /\n/, $t->error_log) { $n{$1}++ if /^\S+ \S+ \[\w+\] (\d+)#\d+: .*$re/ }
    return \%n;
}

# every current worker has exactly $n lines matching $re, and no other pid has any
sub one_line_per_worker {
    my ($t, $re, $name, $n) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my $c = per_pid($t, $re);
    my @w = $t->live_workers;
    my $got = join ' ', map { "$_=" . ($c->{$_} // 0) } sort keys %{ { map { $_ => 1 } @w, keys %$c } };
    my $want = join ' ', map { "$_=" . ($n // 1) } @w;
    is($got, $want, $name) or diag(join "\n", grep { /ratelimit: redis master/ } split /\n/, $t->error_log);
}

sub wait_lines_per_worker {
    my ($t, $re, $secs, $n) = @_;
    my $deadline = time + $secs;
    while (time < $deadline) {
        my $c = per_pid($t, $re);
        my @w = $t->live_workers;
        return time if @w == $WORKERS && !grep { ($c->{$_} // 0) < ($n // 1) } @w;
        sleep 0.1;
    }
    return undef;
}

# When a worker did not move: what each server's workers logged of Redis and
# the sentinels lately, and who the sentinels say is the master.
sub explain_moves {
    for my $i (0 .. $#T) {
        my @l = grep { /ratelimit: / } split /\n/, $T[$i]->error_log;
        diag("server " . ($i + 1) . ": $_") for @l[($#l > 14 ? $#l - 14 : 0) .. $#l];
    }
    diag('sentinel 0 says: ' . join ' ', map { ref $_ ? @$_ : $_ } eval { $s->sentinel(0, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', 'mymaster') } // "($@)");
}

# --- discovery ----------------------------------------------------------------------

for my $t (@T) {
    conf($t, "ratelimit_redis $SENT sentinel=mymaster timeout=100ms connect_timeout=200ms;");
    $t->start_nginx;
}
for my $i (0, 1) {
    my ($when, $r) = $T[$i]->wait_passed('open', 'up', 5);
    ok(defined $when, "server " . ($i + 1) . ": PASSED through the discovered master") or diag(sr($r));
}
my %W0 = map { my $t = $_; ($t => join ' ', $t->live_workers) } @T;
my $IS_AT = qr/ratelimit: redis master "mymaster" is at 127\.0\.0\.1:$PA\b/;
for my $i (0, 1) {
    my $t = $T[$i];
    $t->burst(8, sub { ('/open/index.html', { 'X-Api-Key' => "warm$_[0]" }) }, 3);    # reach both workers
    wait_lines_per_worker($t, $IS_AT, 3);
    one_line_per_worker($t, $IS_AT, 'server ' . ($i + 1) . ': one "redis master "mymaster" is at A" notice per worker');
    like($t->error_log, qr/\[notice\] \d+#\d+: $IS_AT/, 'server ' . ($i + 1) . ': ... at level notice');
}
is(hammer('base', $LIMIT + 5), $EXACT, "both servers, one key: exactly $LIMIT passed");
is($s->node('A', 'EXISTS', 'rl:api:base'), 1, 'the counts are on A');

# --- load on both servers through two failovers --------------------------------------

my @loads = map {
    $_->start_load(clients => 2, max_seconds => 50, max_requests => 30000, pause => 0.01,
        pick => sub { my ($c, $i) = @_; (($c ? 'closed' : 'open'), "L$c-$i") })
} @T;
sleep 0.5;

# 1. SIGKILL of the master
my $t_kill = time;
$s->kill_node('A', 'KILL');
my $t_promo = $s->wait_role('B', 'master', 15);
ok(defined $t_promo, sprintf('SIGKILL of A: B promoted after %.2fs', ($t_promo // time) - $t_kill));
$t_promo //= time;
my ($ex1, $last1, $n1) = wait_exact('kill', 6);
ok(defined $ex1 && $ex1 - $t_promo <= 3,
    sprintf('SIGKILL of A: exact limit from both servers %.2fs after the promotion (<= 3s; %d tries, last %s)',
        ($ex1 // time) - $t_promo, $n1, $last1));
ok($s->wait_sentinels_say($PB, 5), 'the sentinels say B');
my $MOVED_AB = qr/ratelimit: redis master "mymaster" moved from 127\.0\.0\.1:$PA to 127\.0\.0\.1:$PB\b/;
for my $t (@T) { wait_lines_per_worker($t, $MOVED_AB, 5) }
is(hammer('on-b', $LIMIT + 5), $EXACT, 'after the switch to B: exact limit');
is($s->node('B', 'EXISTS', 'rl:api:on-b'), 1, 'the counts are on B');

# 2. A back as a replica of B, then SENTINEL FAILOVER back to A
$s->start_node('A', replicaof => 'B');
ok($s->wait_synced('A', 10), 'A restarted as a replica of B, in sync');
my ($fo, $t_fo);
my $deadline = time + 15;
while (time < $deadline) {
    $fo = eval { $s->sentinel(0, 'SENTINEL', 'FAILOVER', 'mymaster') } // "$@";
    if (!ref $fo && $fo eq 'OK') { $t_fo = time; last }
    sleep 0.25;    # NOGOODSLAVE until the sentinel has fresh INFO of A
}
ok(defined $t_fo, 'SENTINEL FAILOVER mymaster: OK') or diag(ref $fo ? $$fo : $fo);
my $t_promo2 = $s->wait_role('A', 'master', 10);
ok(defined $t_promo2, sprintf('SENTINEL FAILOVER: A promoted after %.2fs', ($t_promo2 // time) - ($t_fo // time)));
$t_promo2 //= time;
# The old master B stays writable until the sentinels demote it (some 10 s
# later); the workers ask the sentinels every second, so they leave it long
# before: counts written to B meanwhile would be lost with its data.
my $MOVED_BA = qr/ratelimit: redis master "mymaster" moved from 127\.0\.0\.1:$PB to 127\.0\.0\.1:$PA\b/;
my @moved2 = map { wait_lines_per_worker($_, $MOVED_BA, 5) } @T;
ok(!(grep { !defined } @moved2), 'every worker of both servers moved to A') or explain_moves();
my ($moved_last) = sort { $b <=> $a } map { $_ // time } @moved2;
cmp_ok($moved_last - $t_promo2, '<=', 2.5,
    sprintf('SENTINEL FAILOVER: every worker on A %.2fs after the promotion, B still a master', $moved_last - $t_promo2));
my ($ex2, $last2, $n2) = wait_exact('failover', 6);
ok(defined $ex2 && $ex2 - $t_promo2 <= 3,
    sprintf('SENTINEL FAILOVER: exact limit from both servers %.2fs after the promotion (<= 3s; %d tries, last %s)',
        ($ex2 // time) - $t_promo2, $n2, $last2));
is($s->node('A', 'EXISTS', 'rl:api:failover-' . ($n2 - 1)), 1, 'the counts after the failover are on A, not on the old master');
my $t_demote = $s->wait_role('B', 'slave', 20);
ok(defined $t_demote, sprintf('B turned into a replica %.1fs after the failover', ($t_demote // time) - ($t_fo // time)));
my ($ex3, $last3, $n3) = wait_exact('after-demotion', 4);
ok(defined $ex3 && $ex3 - ($t_demote // time) <= 3,
    sprintf('B demoted: exact limit from both servers %.2fs later (<= 3s; last %s)', ($ex3 // time) - ($t_demote // time), $last3));
is($s->node('A', 'EXISTS', 'rl:api:after-demotion-' . ($n3 - 1)), 1, 'the counts are on A again');

# 3. the master hangs (SIGSTOP): connections stay open, requests time out; the
#    workers must give up on it and ask the sentinels again
my $t_stop = time;
kill 'STOP', $s->node_pid('A');
my $t_promo3 = $s->wait_role('B', 'master', 15);
ok(defined $t_promo3, sprintf('SIGSTOP of A: B promoted after %.2fs', ($t_promo3 // time) - $t_stop));
$t_promo3 //= time;
my ($ex4, $last4, $n4) = wait_exact('stop', 6);
ok(defined $ex4 && $ex4 - $t_promo3 <= 3,
    sprintf('SIGSTOP of A: exact limit from both servers %.2fs after the promotion (<= 3s; %d tries, last %s)',
        ($ex4 // time) - $t_promo3, $n4, $last4));
my @moved3 = map { wait_lines_per_worker($_, $MOVED_AB, 5, 2) } @T;
ok(!(grep { !defined } @moved3), 'SIGSTOP of A: every worker of both servers moved to B') or explain_moves();
is($s->node('B', 'EXISTS', "rl:api:stop-" . ($n4 - 1)), 1, 'SIGSTOP of A: the counts are on B');
$s->kill_node('A', 'KILL');
sleep 0.5;

my @rec;
for my $i (0, 1) { push @rec, $T[$i]->finish_load($loads[$i]) }
note(scalar(@rec) . ' load requests over ' . sprintf('%.1fs', time - $t_kill));
ok(@rec > 200, 'load ran on both servers (' . scalar(@rec) . ' requests)');
my @errs = grep { $_->{err} ne '-' || !$_->{status} } @rec;
is(scalar @errs, 0, 'every load request answered') or diag(join "\n", map { "$_->{loc} $_->{err}" } @errs[0 .. ($#errs < 9 ? $#errs : 9)]);
# How long nginx took to answer, its $request_time: the client's own time
# adds its connect and its turns on a loaded machine's cores.
my @late = sort { $b->{nt} <=> $a->{nt} } grep { ($_->{nt} // 0) > $TIMEOUT + $LATE } @rec;
is(scalar @late, 0, sprintf('no request answered later than timeout + 50 ms (%.0f ms) by nginx\'s $request_time', 1000 * ($TIMEOUT + $LATE)))
    or diag(scalar(@late) . " late, slowest: " . join(', ', map { sprintf '%s %s/%s %.0fms (client %.0f ms) at +%.2fs', $_->{loc}, $_->{status}, $_->{rs}, 1000 * $_->{nt}, 1000 * $_->{el}, $_->{t0} - $t_kill } @late[0 .. ($#late < 9 ? $#late : 9)]));
my @slow = grep { $_->{el} > $TIMEOUT + $LATE } @rec;
note(scalar(@slow) . ' requests took the client more than timeout + 50 ms: '
    . join(', ', map { sprintf '%.0f ms (nginx %s ms)', 1000 * $_->{el}, defined $_->{nt} ? 1000 * $_->{nt} : '-' } @slow[0 .. ($#slow < 9 ? $#slow : 9)]))
    if @slow;
my ($max) = sort { $b <=> $a } map { $_->{el} } @rec;
note(sprintf 'slowest load request: %.0f ms', 1000 * ($max // 0));
my @ob = grep { $_->{loc} eq 'open' && $_->{status} != 200 } @rec;
is(scalar @ob, 0, 'fail open: 200 throughout');
my %rs;
$rs{"$_->{loc}:$_->{status}/$_->{rs}"}++ for @rec;
note('load outcomes: ' . join(', ', map { "$_=$rs{$_}" } sort keys %rs));

# 4. discovery goes on to the next sentinel: the first two hang (SIGSTOP), the
#    connections to the master are dropped, the workers must ask the third
{
    my @sp = @{ $s->{spids} };
    kill 'STOP', @sp[0, 1];
    my $n = $s->node('B', 'CLIENT', 'KILL', 'TYPE', 'normal');
    cmp_ok($n, '>=', 2 * $WORKERS, "two sentinels hung; the workers' connections to B killed ($n)");
    my $t0 = time;
    my @when = map { ($_->wait_passed('open', 'hung', 5))[0] } @T;
    ok(!(grep { !defined } @when), sprintf('two sentinels hung: both servers PASSED again (%.2fs)', time - $t0));
    # Workers keep their connection to the sentinel that answered them
    # (asked again on it every second): each worker's is now to the third,
    # its last command the question, whichever it held before.
    # (a worker that served no request yet may still be waiting out the
    # hung ones: connect_timeout each)
    my $asking = 0;
    RateLimitTest::wait_until(sub {
        $asking = () = ($s->sentinel(2, 'CLIENT', 'LIST') // '') =~ /cmd=sentinel\|get-master-addr-by-name/g;
        $asking >= 2 * $WORKERS;
    }, 3);
    cmp_ok($asking, '>=', 2 * $WORKERS, "two sentinels hung: every worker asked the third sentinel ($asking connections asking it)");
    my @r = map { my $t = $_; map { $t->req('closed', "hung-r$_") } 1 .. 5 } @T;
    my ($max) = sort { $b <=> $a } map { rhdr($_, 'X-RL-Time') // 1e9 } @r;
    cmp_ok($max, '<=', $TIMEOUT + $LATE, sprintf('two sentinels hung: requests answered within timeout + 50 ms (%.0f ms, $request_time)', 1000 * $max));
    for my $t (@T) { $t->burst(8, sub { ('/open/index.html', { 'X-Api-Key' => "hw$_[0]" }) }, 3) }
    my ($ex, $last) = wait_exact('hung', 3);
    ok(defined $ex, "two sentinels hung: exact limit from both servers through the third (last $last)");
    kill 'CONT', @sp[0, 1];
}

for my $i (0, 1) {
    my $t = $T[$i];
    my $n = $i + 1;
    is(join(' ', $t->live_workers), $W0{$t}, "server $n: the same workers throughout (no respawn)");
    one_line_per_worker($t, $MOVED_AB, "server $n: exactly two \"moved from A to B\" lines per worker (SIGKILL, SIGSTOP)", 2);
    one_line_per_worker($t, $MOVED_BA, "server $n: exactly one \"moved from B to A\" line per worker");
    like($t->error_log, qr/\[warn\] \d+#\d+: $MOVED_AB/, "server $n: \"moved\" at level warn");
    one_line_per_worker($t, $IS_AT, "server $n: still one \"is at\" notice per worker (first discovery only)");
    my $moves = $t->count_log(qr/ratelimit: redis master "mymaster" moved/);
    is($moves, 3 * $WORKERS, "server $n: no other \"moved\" line ($moves)");
    $t->throttle_ok("server $n: redis problems logged at most once a second per worker (\"moved\" lines apart)",
        qr/ratelimit: redis master "mymaster" moved from /);
    $t->stop_nginx;
    $t->final_checks("server $n: no [alert] or [emerg]");
}
$s->kill_node('B', 'TERM');
$t1->stop_process($_, 'TERM', 3) for @{ $s->{spids} };

# --- sentinel and data-node passwords; a "master" that is a replica -------------------

{
    my $sa = SentinelTest->new($t2, nodes => ['M', 'R'], sentinels => 1, quorum => 1,
        data_pass => 'data-pw-4Kq', sentinel_pass => 'sent-pw-9Zx', master_name => 'authmaster');
    $sa->start;
    # the same sentinel also "monitors" the replica under another name
    is($sa->sentinel(0, 'SENTINEL', 'MONITOR', 'notmaster', '127.0.0.1', $sa->port('R'), 1), 'OK', 'sentinel monitors the replica as "notmaster"');
    is($sa->sentinel(0, 'SENTINEL', 'SET', 'notmaster', 'auth-pass', 'data-pw-4Kq'), 'OK', '... with its password');
    my ($SP) = $sa->sentinel_ports;
    my $t = $t2;
    my $run = sub {
        my ($name, $line) = @_;
        $t->stop_nginx;
        unlink $t->tmp . '/error.log';
        conf($t, $line);
        my ($st, $out) = $t->nginx_t;
        is($st, 0, "$name: nginx -t") or diag($out);
        $t->start_nginx;
        return $out;
    };

    $run->('auth', "ratelimit_redis 127.0.0.1:$SP sentinel=authmaster sentinel_password=sent-pw-9Zx password=data-pw-4Kq timeout=100ms connect_timeout=200ms;");
    my ($when) = $t->wait_passed('open', 'auth', 5);
    ok(defined $when, 'sentinel_password= and password=: PASSED');
    my @st = map { $t->req('closed', 'auth-exact')->{status} } 1 .. $LIMIT + 2;
    is("@st", join(' ', (200) x $LIMIT, 429, 429), 'sentinel_password= and password=: exact limit');
    is($sa->node('M', 'EXISTS', 'rl:api:auth-exact'), 1, 'counted on the master');
    $t->stop_nginx;
    $t->final_checks('auth: no [alert] or [emerg]');

    my @cases = (
        ['wrong sentinel_password', "sentinel_password=Bad-Sentinel-Secret-1 password=data-pw-4Kq",
            qr/ratelimit: [^\n]*127\.0\.0\.1:$SP[^\n]*(?:WRONGPASS|AUTH)/, 'Bad-Sentinel-Secret-1'],
        ['no sentinel_password', "password=data-pw-4Kq",
            qr/ratelimit: [^\n]*127\.0\.0\.1:$SP[^\n]*NOAUTH/, undef],
        ['wrong data password', "sentinel_password=sent-pw-9Zx password=Bad-Data-Secret-2",
            qr/ratelimit: redis at "127\.0\.0\.1:${\ $sa->port('M')}" refused AUTH: WRONGPASS/, 'Bad-Data-Secret-2'],
    );
    for my $c (@cases) {
        my ($name, $params, $re, $secret) = @$c;
        my $out = $run->($name, "ratelimit_redis 127.0.0.1:$SP sentinel=authmaster $params timeout=100ms connect_timeout=200ms;");
        my @r = map { $t->req('closed', "bad$_") } 1 .. 3;
        is(join(' ', map { sr($_) } @r), '503/ERROR 503/ERROR 503/ERROR', "$name: fail closed 503 ERROR");
        ok($t->wait_log($re, 1, 3), "$name: error.log names the refusal")
            or diag(join "\n", grep { /ratelimit/ } split /\n/, $t->error_log);
        if (defined $secret) {
            sleep 0.6;
            unlike($t->error_log . $out, qr/\Q$secret\E/, "$name: the secret is in no log line");
        }
        $t->throttle_ok("$name: logged at most once a second per worker");
        $t->stop_nginx;
        $t->final_checks("$name: no [alert] or [emerg]");
    }

    # the sentinel names the replica R: ROLE says slave, the module must not use it
    $run->('ROLE check', "ratelimit_redis 127.0.0.1:$SP sentinel=notmaster sentinel_password=sent-pw-9Zx password=data-pw-4Kq timeout=100ms connect_timeout=200ms;");
    my @r = map { $t->req('closed', "role$_") } 1 .. 3;
    is(join(' ', map { sr($_) } @r), '503/ERROR 503/ERROR 503/ERROR', 'a replica given as the master: not used (fail closed 503 ERROR)');
    ok($t->wait_log(qr/ratelimit: [^\n]*(?:role|replica|slave|not (?:a |the )?master)/i, 1, 3),
        'a replica given as the master: error.log says it is not a master')
        or diag(join "\n", grep { /ratelimit/ } split /\n/, $t->error_log);
    is($sa->node('R', 'EXISTS', 'rl:api:role1'), 0, 'nothing counted on the replica');
    $t->stop_nginx;
    $t->final_checks('ROLE check: no [alert] or [emerg]');

    # -READONLY: the master turns into a replica without dropping its clients
    # (REPLICAOF); the sentinel is pointed at the new master first.  The
    # workers' next calls get -READONLY: they must ask the sentinel again.
    $run->('READONLY', "ratelimit_redis 127.0.0.1:$SP sentinel=authmaster sentinel_password=sent-pw-9Zx password=data-pw-4Kq timeout=100ms connect_timeout=200ms;");
    ($when) = $t->wait_passed('open', 'ro-up', 5);
    ok(defined $when, 'READONLY: PASSED on M');
    $t->burst(8, sub { ('/open/index.html', { 'X-Api-Key' => "row$_[0]" }) }, 3);    # both workers connected
    my ($PM, $PR) = ($sa->port('M'), $sa->port('R'));
    is($sa->node('R', 'REPLICAOF', 'NO', 'ONE'), 'OK', 'READONLY: R made a master');
    is($sa->sentinel(0, 'SENTINEL', 'REMOVE', 'authmaster'), 'OK', 'READONLY: sentinel forgets M');
    is($sa->sentinel(0, 'SENTINEL', 'MONITOR', 'authmaster', '127.0.0.1', $PR, 1), 'OK', 'READONLY: sentinel monitors R');
    is($sa->sentinel(0, 'SENTINEL', 'SET', 'authmaster', 'auth-pass', 'data-pw-4Kq'), 'OK', '... with its password');
    my $before = scalar(() = ($sa->node('M', 'CLIENT', 'LIST') =~ /^id=/mg));
    is($sa->node('M', 'REPLICAOF', '127.0.0.1', $PR), 'OK', 'READONLY: M made a replica of R');
    my $after = scalar(() = ($sa->node('M', 'CLIENT', 'LIST') =~ /^id=/mg));
    note("clients of M before/after REPLICAOF: $before/$after");
    my $t0 = time;
    my $moved = qr/ratelimit: redis master "authmaster" moved from 127\.0\.0\.1:$PM to 127\.0\.0\.1:$PR\b/;
    my $deadline = time + 5;
    my $i = 0;
    while (time < $deadline && !defined wait_lines_per_worker($t, $moved, 0.1)) {
        $t->req('open', 'ro-poke' . $i++, 1);    # calls that meet -READONLY
    }
    ok(defined wait_lines_per_worker($t, $moved, 0.1), sprintf('READONLY: every worker moved from M to R (%.2fs, %d requests)', time - $t0, $i))
        or diag(join "\n", grep { /ratelimit/ } split /\n/, $t->error_log);
    one_line_per_worker($t, $moved, 'READONLY: exactly one "moved" line per worker');
    like($t->error_log, qr/ratelimit: [^\n]*(?:read-only|READONLY)/, 'READONLY: error.log names the read-only reply')
        or diag(join "\n", grep { /ratelimit/ } split /\n/, $t->error_log);
    $t->burst(8, sub { ('/open/index.html', { 'X-Api-Key' => "row2$_[0]" }) }, 3);
    my @ro = map { $t->req('closed', 'ro-exact')->{status} } 1 .. $LIMIT + 2;
    is("@ro", join(' ', (200) x $LIMIT, 429, 429), 'READONLY: exact limit on R');
    is($sa->node('R', 'EXISTS', 'rl:api:ro-exact'), 1, 'READONLY: counted on R');
    $t->stop_nginx;
    $t->final_checks('READONLY: no [alert] or [emerg]');
}

done_testing;
