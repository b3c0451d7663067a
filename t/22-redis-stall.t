#!/usr/bin/perl
# Fault injection: Redis stalled with SIGSTOP for ~3 s.
#
# Expected (spec): requests to a limited location are answered by the fail
# policy within `timeout` (100ms here) plus a small margin; a location without
# a limit on the same single worker keeps answering fast (the worker never
# blocks on Redis); after SIGCONT the late replies are discarded without harm
# and verdicts are correct again.  Redis is always SIGCONTed in cleanup.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use IO::Socket::INET;
use IO::Select;
use Time::HiRes qw(time sleep);
use FaultTest qw(raw_get rhdr sr rems);

RateLimitTest::require_module();

my $WORKERS = 1;
my $t = FaultTest->new(workers => $WORKERS);

my $STOPPED;    # pid of a SIGSTOPped redis
END { kill 'CONT', $STOPPED if $STOPPED }

# ---------------------------------------------------------------------------

$t->start_redis;
$t->write_conf(<<'EOC');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=100ms;
ratelimit_zone api key=$http_x_api_key limit=3 window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    location /lim/    { ratelimit zone=api; alias %%TMP%%/html/; }
    location /closed/ { ratelimit zone=api; ratelimit_fail closed; alias %%TMP%%/html/; }
    location /free/   { alias %%TMP%%/html/; }
}
EOC
$t->start_nginx;

my ($first) = $t->wait_passed('lim', 'warm', 3);
ok(defined $first, 'redis up: PASSED');
my @workers_before = sort map { $_->{pid} } $t->access_entries;

my $MARGIN = 0.5;    # generous: shared machine
my $TIMEOUT = 0.1;

# --- stall under a light sequential load ---------------------------------------
{
    my $rpid = $t->redis_pid;
    kill 'STOP', $rpid;
    $STOPPED = $rpid;
    my $t_stop = time;
    my $load = $t->start_load(
        clients => 3, max_seconds => 10, max_requests => 3000, pause => 0.01,
        pick => sub { my ($c, $i) = @_; ((qw(lim closed free))[$c], "S$c-$i") },
    );

    # a burst of concurrent requests in the middle of the stall
    sleep 1.0;
    my @b = $t->burst(40, sub { my $i = shift; ($i % 2 ? '/closed/index.html' : '/lim/index.html', { 'X-Api-Key' => "B$i" }) }, 5);
    my @lim_b = @b[grep { $_ % 2 == 0 } 0 .. $#b];
    my @cl_b  = @b[grep { $_ % 2 == 1 } 0 .. $#b];
    is(join(',', map { $_->{err} || $_->{status} } @lim_b), join(',', (200) x @lim_b), 'stall burst: fail open 200 for all');
    is(join(',', map { $_->{err} || $_->{status} } @cl_b), join(',', (503) x @cl_b), 'stall burst: fail closed 503 for all');
    my ($bmax) = sort { $b <=> $a } map { $_->{elapsed} } @b;
    cmp_ok($bmax, '<', $TIMEOUT + $MARGIN, sprintf('stall burst: slowest answer %.3fs < timeout + margin', $bmax));
    is(join(',', map { rhdr($_, 'X-RL-Status') // '-' } @lim_b), join(',', ('ERROR') x @lim_b), 'stall burst: ERROR');

    sleep 2.0;
    my @rec = $t->finish_load($load);
    kill 'CONT', $rpid;
    my $t_cont = time;
    $STOPPED = undef;
    note(sprintf 'redis stopped for %.2fs, %d requests', $t_cont - $t_stop, scalar @rec);

    my @errs = grep { $_->{err} ne '-' || !$_->{status} } @rec;
    is(scalar @errs, 0, 'stall: every request answered') or diag(join "\n", map { "$_->{loc} $_->{err}" } @errs[0 .. ($#errs < 9 ? $#errs : 9)]);

    my @lim  = grep { $_->{loc} eq 'lim' } @rec;
    my @cl   = grep { $_->{loc} eq 'closed' } @rec;
    my @free = grep { $_->{loc} eq 'free' } @rec;
    ok(@lim > 5 && @cl > 5 && @free > 20, sprintf('stall: requests made (lim %d, closed %d, free %d)', scalar @lim, scalar @cl, scalar @free));

    my @lb = grep { $_->{status} != 200 || $_->{rs} ne 'ERROR' } @lim;
    is(scalar @lb, 0, 'stall: fail open answers 200 ERROR') or diag(join ' ', map { "$_->{status}/$_->{rs}" } @lb[0 .. ($#lb < 19 ? $#lb : 19)]);
    my @cb = grep { $_->{status} != 503 || $_->{rs} ne 'ERROR' } @cl;
    is(scalar @cb, 0, 'stall: fail closed answers 503 ERROR') or diag(join ' ', map { "$_->{status}/$_->{rs}" } @cb[0 .. ($#cb < 19 ? $#cb : 19)]);

    my ($lmax) = sort { $b <=> $a } map { $_->{el} } @lim, @cl;
    cmp_ok($lmax, '<', $TIMEOUT + $MARGIN, sprintf('stall: limited requests answered within timeout + margin (slowest %.3fs)', $lmax));

    # Until Redis has been silent for 2 s, requests wait out the timeout;
    # after that the worker drops the wedged connection and reconnects, and
    # requests that come while it is down fail at once, as they should.
    my @early = grep { $_->{t0} - $t_stop < 1.5 } @lim, @cl;
    my ($lmin) = sort { $a <=> $b } map { $_->{el} } @early;
    cmp_ok($lmin // 0, '>=', $TIMEOUT * 0.8, sprintf('stall: limited requests in its first 1.5 s waited for the timeout (fastest %.3fs)', $lmin // 0));

    my ($fmax) = sort { $b <=> $a } map { $_->{el} } @free;
    my @fbad = grep { $_->{status} != 200 } @free;
    is(scalar @fbad, 0, 'stall: unlimited location answers 200');
    cmp_ok($fmax, '<', 0.25, sprintf('stall: unlimited location answers fast (slowest %.3fs): worker not blocked', $fmax));

    ok($t->wait_log(qr/ratelimit: redis timed out after 100 ms, request (?:passed|rejected)/, 1, 2),
        'error.log: "redis timed out after 100 ms, request passed/rejected"');
}

# --- after SIGCONT: late replies discarded, verdicts correct -------------------
{
    my ($when) = $t->wait_passed('lim', 'resume', 4);
    ok(defined $when, 'after SIGCONT: PASSED again');
    my @r = map { $t->req('lim', 'exact') } 1 .. 4;
    is(join(' ', map { $_->{status} } @r), '200 200 200 429', 'after SIGCONT: exact limit');
    is(rems(@r), '2 1 0 0', 'after SIGCONT: remaining 2 1 0 0');
    is(join(' ', map { rhdr($_, 'X-RL-Status') // '-' } @r), 'PASSED PASSED PASSED REJECTED', 'after SIGCONT: statuses');

    # interleaved subjects on concurrent requests: each verdict is its own
    my @b = $t->burst(30, sub { my $i = shift; ('/lim/index.html', { 'X-Api-Key' => 'mix' . ($i % 3) }) }, 5);
    my %ok;
    for my $i (0 .. $#b) { $ok{ $i % 3 }{ $b[$i]{status} }++ }
    is(join(' ', map { ($ok{$_}{200} // 0) . '/' . ($ok{$_}{429} // 0) } 0 .. 2), '3/7 3/7 3/7',
        'after SIGCONT: three subjects x 10 concurrent requests: exactly 3 passed each');
    for my $k (0 .. 2) {
        is($t->redis_window_total("rl:api:mix$k"), 3, "after SIGCONT: redis count of mix$k is 3");
    }

    # a second, shorter stall: the link is still usable afterwards
    kill 'STOP', $t->redis_pid;
    $STOPPED = $t->redis_pid;
    my $s = $t->req('lim', 'exact2');
    # sent while the call above is in flight: held behind it, never sent,
    # as it got the fail policy before Redis answered the first
    my $h = $t->req('lim', 'held2');
    kill 'CONT', $t->redis_pid;
    $STOPPED = undef;
    is($s->{status} . '/' . (rhdr($s, 'X-RL-Status') // '-'), '200/ERROR', 'second stall: fail open ERROR');
    cmp_ok($s->{elapsed}, '<', $TIMEOUT + $MARGIN, 'second stall: within timeout + margin');
    is(sr($h), '200/ERROR', 'second stall: a request held behind the stalled call: fail open ERROR');
    sleep 0.3;
    is($t->redis_window_total('rl:api:held2'), 0, 'second stall: the held request was not counted once Redis resumed');
    my @r2 = map { $t->req('lim', 'exact2') } 1 .. 3;
    # the stalled request was counted by redis once it resumed: 1 + 3 requests
    is(join(' ', map { $_->{status} } @r2), '200 200 429', 'second stall: the late-counted request is accounted, then exact limit');
}

# --- CLIENT PAUSE WRITE (as during a failover): the script's writes wait --------
{
    is($t->redis('CLIENT', 'PAUSE', 1500, 'WRITE'), 'OK', 'CLIENT PAUSE 1500 WRITE');
    my $t0 = time;
    my @r = map { $t->req('lim', "pause$_") } 1 .. 3;
    my $c = $t->req('closed', 'pausec');
    my $f = raw_get($t->port, '/free/index.html', {}, 5);
    my $paused = time - $t0 < 1.4;    # all of the above happened during the pause
    is(join(' ', map { sr($_) } @r, $c), '200/ERROR 200/ERROR 200/ERROR 503/ERROR', 'paused: fail policy');
    my ($max) = sort { $b <=> $a } map { $_->{elapsed} } @r, $c;
    cmp_ok($max, '<', $TIMEOUT + $MARGIN, sprintf('paused: answered within timeout + margin (%.3fs)', $max));
    ok($f->{status} == 200 && $f->{elapsed} < 0.25, 'paused: unlimited location fast');
    ok($paused, 'the requests above ran during the pause');

    # a connection killed with calls in flight (paused): answered at once
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t->port, Proto => 'tcp', Timeout => 5) or die;
    syswrite($s, "GET /closed/index.html HTTP/1.0\r\nX-Api-Key: killed\r\n\r\n");
    sleep 0.03;    # the call is now queued in redis, behind the pause
    my $k0 = time;
    my $n = $t->redis('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    my $buf = '';
    my $sel = IO::Select->new($s);
    while ($sel->can_read(5)) { my $got = sysread($s, my $chunk, 65536); last unless $got; $buf .= $chunk }
    close $s;
    my $k = time - $k0;
    like($buf, qr{^HTTP/1\.1 503}, "connection killed with a call in flight: fail closed 503 ($n killed)");
    cmp_ok($k, '<', $TIMEOUT + $MARGIN, sprintf('connection killed with a call in flight: answered in %.3fs', $k));

    sleep(1.6 - (time - $t0)) if time - $t0 < 1.6;    # pause over
    my ($when) = $t->wait_passed('lim', 'unpause', 4);
    ok(defined $when, 'after the pause: PASSED again');
    my @e = map { $t->req('lim', 'pexact') } 1 .. 4;
    is(join(' ', map { $_->{status} } @e), '200 200 200 429', 'after the pause: exact limit');
}

my @wp = $t->served_pids;
is(scalar @wp, 1, 'one worker served every request (no respawn)') or diag("@wp");

$t->throttle_ok('redis problems logged at most once a second per worker');

$t->stop_nginx;
$t->stop_redis;
$t->final_checks;

done_testing;
