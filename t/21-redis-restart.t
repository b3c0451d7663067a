#!/usr/bin/perl
# Fault injection: Redis not running at start and started later; Redis killed
# (SIGKILL) under concurrent load and restarted empty on the same port.
#
# Expected (spec): fail open passes everything (2xx), fail closed answers 503
# during the outage, no request waits much longer than `timeout`, no worker
# crash, reconnect with backoff capped at 500 ms so limiting resumes within
# about a second, the script is loaded again (SCRIPT LOAD) into the empty
# Redis, and Redis problems are logged at most once a second per worker.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use FaultTest qw(raw_get rhdr rems);
use RateLimitTest qw(fail_policy_http);

RateLimitTest::require_module();

my $WORKERS = 2;
my $t = FaultTest->new(workers => $WORKERS);

# ---------------------------------------------------------------------------

my $RPORT = $t->redis_port;    # allocated now, nothing listens yet

$t->write_conf(fail_policy_http(
    'ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=100ms connect_timeout=200ms;',
    limit => 3, free => 1));

# --- 1. Redis not running at start, started later ----------------------------

$t->start_nginx;
{
    my @r = map { $t->req('open', 'down') } 1 .. 4;
    is(join(' ', map { $_->{status} } @r), '200 200 200 200', 'redis down at start: fail open passes all (over the limit too)');
    is(join(' ', map { rhdr($_, 'X-RL-Status') // '-' } @r), 'ERROR ERROR ERROR ERROR', 'redis down at start: status ERROR');
    my $c = $t->req('closed', 'down');
    is($c->{status}, 503, 'redis down at start: fail closed 503');
    ok(!(grep { $_->{elapsed} > 1 } @r, $c), 'redis down at start: answered at once');

    ok($t->wait_log(qr/ratelimit: cannot connect to redis at "127\.0\.0\.1:$RPORT": Connection refused/, 1, 3),
        'error.log: cannot connect ... Connection refused');

    sleep 1.6;    # let the backoff reach its cap
    $t->start_redis(port => $RPORT);
    my $up = time;
    my ($when, $r) = $t->wait_passed('open', 'later', 4);
    ok(defined $when, 'redis started later: requests PASSED again') or diag("last status: " . (rhdr($r, 'X-RL-Status') // $r->{err}));
    my $delay = defined $when ? $when - $up : 99;
    ok($delay <= 2.0, sprintf('redis started later: limiting resumed after %.2fs (<= 2s)', $delay));
    note(sprintf 'resumed after %.3fs', $delay);

    my @s = map { $t->req('open', 'later-limit') } 1 .. 4;
    is(join(' ', map { $_->{status} } @s), '200 200 200 429', 'redis started later: exact limit');
    is(rems(@s), '2 1 0 0', 'redis started later: remaining');
    is($t->redis_window_total('rl:api:later-limit'), 3, 'redis started later: counted in redis');
}

# --- 2. SIGKILL under load, restart empty on the same port -------------------

{
    # the first requests after the restart above may still be settling
    my (undef) = $t->wait_passed('closed', 'warm', 3);
    my $load = $t->start_load(
        clients => 4, max_seconds => 14, max_requests => 4000, pause => 0.005,
        pick => sub { my ($c, $i) = @_; (($c % 2 ? 'closed' : 'open'), "L$c-$i") },
    );
    sleep 1.0;
    my $rpid = $t->redis_pid;
    my $t_kill = time;
    kill 'KILL', $rpid;
    $t->stop_redis;    # reaps the killed process
    ok(!kill(0, $rpid), 'redis killed');

    # outage: probe the closed location from here as well
    sleep 0.3;
    my @probe = map { my $r = $t->req('closed', "probe$_"); sleep 0.1; $r } 1 .. 5;
    is(join(' ', map { $_->{status} } @probe), '503 503 503 503 503', 'outage: fail closed answers 503');
    my @po = map { $t->req('open', "probeo$_") } 1 .. 3;
    is(join(' ', map { $_->{status} . '/' . (rhdr($_, 'X-RL-Status') // '-') } @po), '200/ERROR 200/ERROR 200/ERROR',
        'outage: fail open answers 200 with ERROR');
    my $free = raw_get($t->port, '/free/index.html', {}, 5);
    ok($free->{status} == 200 && $free->{elapsed} < 0.5, 'outage: unlimited location fine');
    sleep 0.6;

    $t->start_redis(port => $RPORT);    # empty: no keys, no scripts
    my $t_up = time;
    is($t->redis('DBSIZE'), 0, 'restarted redis is empty');
    my ($when, $r) = $t->wait_passed('open', 'back', 4);
    ok(defined $when, 'after restart: PASSED again');
    my $delay = defined $when ? $when - $t_up : 99;
    ok($delay <= 2.0, sprintf('after restart: limiting resumed after %.2fs (<= 2s)', $delay));
    note(sprintf 'resumed after %.3fs', $delay);

    sleep 2.5;
    my @rec = $t->finish_load($load);
    note(scalar(@rec) . ' load requests');
    ok(@rec > 100, 'load produced requests (' . scalar(@rec) . ')');

    my @errs = grep { $_->{err} ne '-' || !$_->{status} } @rec;
    is(scalar @errs, 0, 'load: every request answered') or diag(join "\n", map { "$_->{loc} $_->{err} el=$_->{el}" } @errs[0 .. ($#errs < 9 ? $#errs : 9)]);
    my @slow = sort { $b->{el} <=> $a->{el} } grep { $_->{el} > 1.0 } @rec;
    is(scalar @slow, 0, 'load: no request took longer than 1s (timeout=100ms)')
        or diag(join "\n", map { sprintf '%s %s %.3fs at +%.2fs', $_->{loc}, $_->{status}, $_->{el}, $_->{t0} - $t_kill } @slow[0 .. ($#slow < 9 ? $#slow : 9)]);
    my ($max) = sort { $b <=> $a } map { $_->{el} } @rec;
    note(sprintf 'slowest request: %.3fs', $max // 0);

    my @open = grep { $_->{loc} eq 'open' } @rec;
    my @open_bad = grep { $_->{status} !~ /^2/ } @open;
    is(scalar @open_bad, 0, 'fail open: every request 2xx (' . scalar(@open) . ' requests)')
        or diag(join ' ', map { "$_->{status}/$_->{rs}" } @open_bad[0 .. ($#open_bad < 19 ? $#open_bad : 19)]);

    my @closed = grep { $_->{loc} eq 'closed' } @rec;
    my @before = grep { $_->{t1} < $t_kill } @closed;
    my @during = grep { $_->{t0} > $t_kill + 0.2 && $_->{t1} < $t_up } @closed;
    my @after  = grep { $_->{t0} > $when + 0.2 } @closed if defined $when;
    ok(@before > 5 && !(grep { $_->{status} != 200 || $_->{rs} ne 'PASSED' } @before),
        'fail closed, before the kill: 200 PASSED (' . scalar(@before) . ')');
    ok(@during > 5 && !(grep { $_->{status} != 503 || $_->{rs} ne 'ERROR' } @during),
        'fail closed, during the outage: 503 ERROR (' . scalar(@during) . ')')
        or diag(join ' ', map { "$_->{status}/$_->{rs}" } @during);
    ok(@after && !(grep { $_->{status} != 200 || $_->{rs} ne 'PASSED' } @after),
        'fail closed, after the restart: 200 PASSED (' . scalar(@after // ()) . ')')
        or diag(join ' ', map { "$_->{status}/$_->{rs}" } grep { $_->{status} != 200 } @after);

    # limiting works on the restarted (empty) Redis: script loaded again
    my @s = map { $t->req('open', 'after-kill') } 1 .. 5;
    is(join(' ', map { $_->{status} } @s), '200 200 200 429 429', 'after restart: exact limit');
    is(join(' ', map { rhdr($_, 'X-RL-Status') // '-' } @s), 'PASSED PASSED PASSED REJECTED REJECTED', 'after restart: statuses');
    is($t->redis_window_total('rl:api:after-kill'), 3, 'after restart: counted in the new redis');
    ok(defined rhdr($s[3], 'Retry-After') && defined rhdr($s[3], 'RateLimit'), 'after restart: 429 carries the headers');

    my $deadline = time + 3;
    my $loads;
    while (($loads = $t->commandstat('script|load')) < $WORKERS && time < $deadline) { sleep 0.1 }
    cmp_ok($loads, '>=', $WORKERS, "SCRIPT LOAD sent again by every worker on reconnect ($loads)");
    note('EVAL fallbacks on the new redis: ' . $t->commandstat('eval'));

    like(substr($t->error_log, 0), qr/ratelimit: (?:lost connection to redis|cannot connect to redis|redis is not connected|redis connection failed)/,
        'error.log names the redis outage');
}

$t->throttle_ok('redis problems logged at most once a second per worker');

$t->stop_nginx;
$t->stop_redis;
$t->final_checks;

done_testing;
