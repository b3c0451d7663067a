#!/usr/bin/perl
# Fault injection: the script disappears from Redis (SCRIPT FLUSH) while nginx
# runs.
#
# Expected (spec): a NOSCRIPT reply makes the module resend the script with
# EVAL once (which caches it again), so the next requests still get correct
# verdicts: the exact limit holds, for sequential and concurrent requests and
# for requests under two zones.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use FaultTest qw(rhdr statuses rems);

RateLimitTest::require_module();

my $WORKERS = 1;
my $t = FaultTest->new(workers => $WORKERS);

# ---------------------------------------------------------------------------
# helpers (local to this file)

sub noscript_errors {
    my $info = $t->redis('INFO', 'errorstats');
    return $info =~ /^errorstat_NOSCRIPT:count=(\d+)/m ? $1 : 0;
}

# ---------------------------------------------------------------------------

# The script's path: with the Redis module loaded its command decides.
$t->start_redis(redis_module => 0);
$t->write_conf(<<'EOC');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=2s;
ratelimit_zone api key=$http_x_api_key limit=5 window=60s;
ratelimit_zone two key=$http_x_api_key limit=3 window=60s;
ratelimit_zone fix key=$http_x_api_key limit=4 window=60s algorithm=fixed;
server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    location /one/ { ratelimit zone=api; alias %%TMP%%/html/; }
    location /two/ { ratelimit zone=api; ratelimit zone=two; alias %%TMP%%/html/; }
    location /fix/ { ratelimit zone=fix; ratelimit_fail closed; alias %%TMP%%/html/; }
}
EOC
$t->start_nginx;
{
    my ($up) = $t->wait_passed('one', 'warm', 3);
    ok(defined $up, 'nginx + redis up');
}
my @all;    # every response, to check that none was an ERROR

# --- sequential ----------------------------------------------------------------
{
    my @a = map { $t->req('one', 'seq') } 1 .. 2;
    is($t->redis('SCRIPT', 'FLUSH'), 'OK', 'SCRIPT FLUSH');
    my $eval0 = $t->commandstat('eval');
    my $ns0 = noscript_errors();
    my @b = map { $t->req('one', 'seq') } 1 .. 5;
    push @all, @a, @b;
    is(statuses(@a, @b), '200 200 200 200 200 429 429', 'after SCRIPT FLUSH: exact limit (5)');
    is(rems(@a, @b), '4 3 2 1 0 0 0', 'after SCRIPT FLUSH: remaining continues where it was');
    is(join(' ', map { rhdr($_, 'X-RL-Status') // '-' } @b), 'PASSED PASSED PASSED REJECTED REJECTED', 'after SCRIPT FLUSH: statuses');
    is($t->redis_window_total('rl:api:seq'), 5, 'after SCRIPT FLUSH: redis count 5');
    is(noscript_errors() - $ns0, 1, 'redis answered NOSCRIPT once');
    is($t->commandstat('eval') - $eval0, 1, 'the module resent the script with EVAL once; EVALSHA worked again afterwards');
    unlike($t->error_log, qr/does not have the script/, 'no "does not have the script" failure logged');
}

# --- concurrent requests in flight when the script is gone ------------------------
for my $round (1 .. 3) {
    is($t->redis('SCRIPT', 'FLUSH'), 'OK', "round $round: SCRIPT FLUSH");
    my @b = $t->burst(12, sub { ('/one/index.html', { 'X-Api-Key' => "conc$round" }) }, 5);
    push @all, @b;
    my %n;
    $n{ $_->{err} || $_->{status} }++ for @b;
    is(($n{200} // 0) . '/' . ($n{429} // 0), '5/7', "round $round: 12 concurrent requests after SCRIPT FLUSH: exactly 5 admitted");
    my @rem = sort { $a <=> $b } map { rhdr($_, 'X-RateLimit-Remaining') } grep { $_->{status} == 200 } @b;
    is("@rem", '0 1 2 3 4', "round $round: admitted requests saw remaining 4..0 once each");
    is($t->redis_window_total("rl:api:conc$round"), 5, "round $round: redis count 5");
}

# --- two zones in one call ------------------------------------------------------------
{
    is($t->redis('SCRIPT', 'FLUSH'), 'OK', 'two zones: SCRIPT FLUSH');
    my @r = map { $t->req('two', 'multi') } 1 .. 4;
    push @all, @r;
    is(statuses(@r), '200 200 200 429', 'two zones after SCRIPT FLUSH: the smaller limit (3) holds');
    is($t->redis_window_total('rl:api:multi'), 3, 'two zones: zone api counted 3');
    is($t->redis_window_total('rl:two:multi'), 3, 'two zones: zone two counted 3');
}

# --- fixed window, fail closed: never a 503 because of the flush -----------------
{
    is($t->redis('SCRIPT', 'FLUSH'), 'OK', 'fixed window: SCRIPT FLUSH');
    my @r = map { $t->req('fix', 'fx') } 1 .. 5;
    push @all, @r;
    is(statuses(@r), '200 200 200 200 429', 'fixed window, fail closed, after SCRIPT FLUSH: exact limit, no 503');
}

# --- flush between every request ------------------------------------------------------
{
    my @r;
    for (1 .. 7) {
        $t->redis('SCRIPT', 'FLUSH');
        push @r, $t->req('one', 'every');
    }
    push @all, @r;
    is(statuses(@r), '200 200 200 200 200 429 429', 'SCRIPT FLUSH before every request: exact limit');
    is(rems(@r), '4 3 2 1 0 0 0', 'SCRIPT FLUSH before every request: remaining 4..0');
}

# --- FLUSHALL and SCRIPT FLUSH together: counting starts afresh ------------------------
{
    # (a subject counted but never rejected: workers may remember rejections)
    my @p = map { $t->req('one', 'part') } 1 .. 3;
    is(statuses(@p), '200 200 200', 'subject "part" counted 3 of 5');
    is($t->redis('FLUSHALL'), 'OK', 'FLUSHALL');
    is($t->redis('SCRIPT', 'FLUSH'), 'OK', 'SCRIPT FLUSH');
    my @r = map { $t->req('one', 'part') } 1 .. 6;
    push @all, @p, @r;
    is(statuses(@r), '200 200 200 200 200 429', 'FLUSHALL + SCRIPT FLUSH: the subject starts afresh, exact limit');
    is(rems(@r), '4 3 2 1 0 0', 'FLUSHALL + SCRIPT FLUSH: remaining 4..0');
}

my @err = grep { (rhdr($_, 'X-RL-Status') // '') eq 'ERROR' || $_->{err} } @all;
is(scalar @err, 0, 'no request got ERROR (' . scalar(@all) . ' requests)');

$t->stop_nginx;
$t->stop_redis;
$t->final_checks;

done_testing;
