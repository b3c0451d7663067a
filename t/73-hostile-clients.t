#!/usr/bin/perl
# Hostile clients (issue 39): what a client sends or does must never take
# it past a limit, nor hang an API call.  Each case was a way past the
# module's promise once; this file keeps them for every feature after.
# One nginx of two workers, one Redis.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use HTTP::Tiny;
use Time::HiRes qw(time sleep);
use JSON::PP qw(decode_json);
use RateLimitTest qw(hdr);
use IO::Socket::INET;
use TokenBackend;

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 2);
$t->start_redis;
my $REDIS_PORT = $t->redis_port;
my $BACKEND = $t->port('BACKEND');
TokenBackend::start($t, $BACKEND);

$t->write_conf(<<"EOF" . <<'EOF');
ratelimit_redis 127.0.0.1:$REDIS_PORT timeout=300ms;
ratelimit_local_memory 64k;
upstream tokens { server 127.0.0.1:$BACKEND; }
EOF
ratelimit_zone z key=$http_x_api_key limit=5 window=60s;
ratelimit_zone g key=$http_x_api_key rate=10r/s algorithm=gcra;
ratelimit_zone ls key=$http_x_api_key limit=1000000 window=60s lease=32k;
ratelimit_zone vl key=$http_x_api_key limit=3 window=60s;
ratelimit_zone c key=$http_x_api_key limit=10 window=60s;
ratelimit_zone tok key=$http_x_api_key limit=100000 window=60s;
ratelimit_zone max key=$http_x_api_key limit=9007199254740992 window=60s;
ratelimit_zone cg key=$http_x_api_key rate=1r/s algorithm=gcra;
ratelimit_zone lv key=$http_x_api_key limit=$http_x_limit window=60s;
ratelimit_zone rv key=$http_x_api_key rate=$http_x_limit window=60s algorithm=gcra;
ratelimit_zone fl key=$http_x_api_key limit=1000000 window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    location /z/ { ratelimit zone=z; alias %%TMP%%/html/; }
    location = /q { ratelimit_query zone=z delete=on; }
    location = /qg { ratelimit_query zone=z zone=g; }
    location /ls/ { ratelimit zone=ls; alias %%TMP%%/html/; }
    location /c/ { ratelimit zone=c cost=$http_x_cost; ratelimit_fail closed; alias %%TMP%%/html/; }
    location /cg/ { ratelimit zone=cg burst=5 cost=$http_x_cost nodelay; alias %%TMP%%/html/; }
    location /lv/ { ratelimit zone=lv; alias %%TMP%%/html/; }
    location /rv/ { ratelimit zone=rv nodelay; alias %%TMP%%/html/; }
    location = /metrics { ratelimit_metrics; }
    location /max/ { ratelimit zone=max cost=$http_x_cost; alias %%TMP%%/html/; }
    location /tok/ {
        ratelimit zone=tok cost=1000;
        ratelimit_settle zone=tok $upstream_http_x_usage_tokens empty=refund;
        proxy_pass http://tokens;
    }
    location = /qc { ratelimit_query zone=c; }
    location /vl/ { ratelimit zone=vl; ratelimit_fail local; alias %%TMP%%/html/; }
    location /fl/ { ratelimit zone=fl; ratelimit_fail local; alias %%TMP%%/html/; }
}
EOF
$t->start_nginx;

# wrk on one connection of 4 for `seconds`, every request to `path` with
# the X-Api-Key the Lua expression `subject` makes of n, its number.
sub wrk {
    my ($seconds, $path, $subject) = @_;
    my $script = $t->tmp . '/subjects.lua';
    open my $fh, '>', $script or die $!;
    print $fh "local n = 0\n",
        "local function subject(n) $subject end\n",
        "request = function()\n",
        "    n = n + 1\n",
        "    wrk.headers['X-Api-Key'] = subject(n)\n",
        "    return wrk.format('GET', '$path')\n",
        "end\n";
    close $fh;
    system("/usr/bin/wrk -t1 -c4 -d${seconds}s -s $script " . $t->url('/') . ' >/dev/null') == 0
        or die "wrk: $?";
}

sub del {
    my ($path) = @_;
    return HTTP::Tiny->new(timeout => 10)->request('DELETE', $t->url($path));
}

# --- the forgive DELETE is bounded by timeout --------------------------------

{
    kill 'STOP', $t->redis_pid;
    my $start = time;
    my $r = del('/q?zone=z&key=s');
    my $took = time - $start;
    kill 'CONT', $t->redis_pid;
    is($r->{status}, 503, 'DELETE with Redis stalled: 503');
    like($r->{content}, qr/timed out/, 'DELETE with Redis stalled: says it timed out');
    cmp_ok($took, '<', 1.3, sprintf('DELETE with Redis stalled: answered within timeout (300 ms) + 1 s (%.2f s)', $took));
    is(del('/q?zone=z&key=s')->{status}, 204, 'DELETE with Redis back: 204');
}

# --- an interval longer than a GCRA zone's emission interval -----------------
# A GCRA zone has no buckets nor interval fields: the window zone beside it
# answers the interval.

{
    $t->get('/z/index.html', { 'X-Api-Key' => 'iv' }) for 1 .. 2;
    my $r = $t->get('/qg?key=iv&interval=10s');
    is($r->{status}, 200, 'interval=10s over a window zone and a GCRA zone: 200')
        or diag($r->{content});
    my $j = eval { decode_json($r->{content}) };
    $j = [] unless ref $j eq 'ARRAY';
    my ($z) = grep { $_->{zone} eq 'z' } @$j;
    my ($g) = grep { $_->{zone} eq 'g' } @$j;
    is($z && $z->{count_in_interval}, 2, 'the window zone counts its 2 requests in the interval');
    ok($g && !exists $g->{count_in_interval}, 'the GCRA zone has no interval fields');
}

# --- a cost or a limit that is no valid value is the client's bad request --
# Not the fail policy meant for Redis (which `open`, the default, admits):
# 400, $ratelimit_status INVALID, the metrics' decision "invalid", nothing
# counted.

sub status_rs {
    my ($path, $h) = @_;
    my $r = $t->get($path, $h);
    return "$r->{status} " . (hdr($r, 'X-RL-Status') // '-');
}

{
    my @bad = ('-1', 'x', '+5', '0x10', '1e3', '9007199254740993', '5,6', '');
    for my $cost (@bad) {
        is(status_rs('/c/index.html', { 'X-Api-Key' => 'cost', 'X-Cost' => $cost }), '400 INVALID',
           "cost \"$cost\": 400, INVALID");
    }
    is(status_rs('/c/index.html', { 'X-Api-Key' => 'cost' }), '400 INVALID', 'no cost header: 400, INVALID');
    is(status_rs('/cg/index.html', { 'X-Api-Key' => 'cost', 'X-Cost' => 'x' }), '400 INVALID',
       'an invalid cost in a GCRA zone: 400, INVALID');
    my $r = $t->get('/c/index.html', { 'X-Api-Key' => 'cost', 'X-Cost' => '1' });
    is(hdr($r, 'X-RateLimit-Remaining'), 9, 'a valid cost of 1 then: the invalid ones counted nothing');
    my $m = $t->get('/metrics')->{content} // '';
    my ($n) = $m =~ /^nginx_ratelimit_decisions_total\{zone="c",decision="invalid"\} (\d+)/m;
    is($n, scalar(@bad) + 1, 'the metrics count them as decision="invalid"');
    like($t->error_log, qr/invalid cost "[^"]*" for zone "c", request refused with 400/, 'logged as refused');
}

# Counts are exact to the documented maximum, 2^53: 1 + 2^53 is over it,
# though a double rounds it to 2^53.
{
    my @r = map { status_rs('/max/index.html', { 'X-Api-Key' => 'big', 'X-Cost' => $_ }) }
        1, 9007199254740992, 9007199254740991, 1, 1;
    is("@r[0 .. 2]", '200 PASSED 429 REJECTED 200 PASSED',
       '2^53: cost 1, then 2^53 is over, then 2^53 - 1 fills the limit exactly');
    is("@r[3 .. 4]", '429 REJECTED 429 REJECTED', '2^53: full, a cost of 1 is over');
}

# A limit of 0, from a variable, blocks the subject: 429, nothing counted;
# a limit that is no limit is a bad request.
{
    my $r = $t->get('/lv/index.html', { 'X-Api-Key' => 'zero', 'X-Limit' => '0' });
    is("$r->{status} " . (hdr($r, 'X-RL-Status') // '-'), '429 REJECTED', 'limit 0: 429, REJECTED');
    is(hdr($r, 'X-RateLimit-Limit'), 0, 'limit 0: X-RateLimit-Limit 0');
    is(hdr($r, 'Retry-After'), 60, 'limit 0: Retry-After the window');
    $r = $t->get('/rv/index.html', { 'X-Api-Key' => 'zero', 'X-Limit' => '0r/s' });
    is("$r->{status} " . (hdr($r, 'X-RL-Status') // '-'), '429 REJECTED', 'rate 0r/s in a GCRA zone: 429, REJECTED');
    for my $limit ('abc', '-5', '9007199254740993', '5 per minute') {
        is(status_rs('/lv/index.html', { 'X-Api-Key' => 'zero', 'X-Limit' => $limit }), '400 INVALID',
           "limit \"$limit\": 400, INVALID");
    }
    $r = $t->get('/lv/index.html', { 'X-Api-Key' => 'zero', 'X-Limit' => '5' });
    is(hdr($r, 'X-RateLimit-Remaining'), 4, 'limit 5 then: nothing was counted before');
}

# --- a client that leaves keeps its reservation -------------------------------
# empty=refund is for an upstream that gave no value, not for a client that
# closed before nginx read it: 5 clients leave at 0.2 s of a 0.6 s answer.

{
    my @gone;
    for (1 .. 5) {
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t->port('PORT'))
            or die "connect: $!";
        print $s "GET /tok/x?hold=600&lo=700&hi=700 HTTP/1.1\r\nHost: x\r\nX-Api-Key: leaver\r\n\r\n";
        push @gone, $s;
    }
    sleep 0.2;
    close $_ for @gone;
    my $left = () = $t->access_entries_for(sub { $_->{uri} =~ m{^/tok/} && $_->{status} == 499 }, 5, 5);
    is($left, 5, 'the 5 clients that left are logged 499');
    my $r = $t->get('/tok/x?mode=fail&hold=10', { 'X-Api-Key' => 'leaver' });
    is($r->{status}, 502, 'an upstream that fails: 502');
    $r = $t->get('/tok/x?lo=700&hi=700', { 'X-Api-Key' => 'leaver' });
    is($r->{status}, 200, 'an answer of 700 tokens');
    my $used;
    RateLimitTest::wait_until(sub { ($used = $t->redis_window_total('rl:tok:leaver') // 0) == 5700 }, 3);
    is($used, 5700, 'the leavers keep their 5 x 1000, the failed upstream is refunded, the answer settles at 700');
}

# --- evicted leases give back every unit -------------------------------------
# 600 subjects whose keys have many lengths through a 32 KB lease table:
# making one subject's entry evicts several others (slab sizes differ).
# Once quiet, Redis's counts must be the requests admitted, and the requests
# wrk cut as it stopped while their call was in Redis (logged 499 with no
# verdict): Redis counted those, as it counts any request it was asked
# about.  One of them may have left while waiting for its lease's renewal
# instead, not counted: so those are a bound, at most wrk's 4 connections.

{
    wrk(2, '/ls/index.html', 'local i = math.floor(n / 30) % 600
        return "s" .. i .. string.rep("k", i % 97)');
    # A request wrk gave up on as it stopped may still be served and logged
    # after it: both sides are read again until they agree.
    my ($admitted, $left, $counted);
    RateLimitTest::wait_until(sub {
        my @e = grep { $_->{uri} eq '/ls/index.html' } $t->access_entries;
        $admitted = grep { $_->{rs} eq 'PASSED' } @e;
        $left = grep { $_->{status} == 499 && $_->{rs} eq '-' } @e;
        $counted = 0;
        $counted += $t->redis_window_total($_) // 0 for grep { /:ls:/ } @{ $t->redis('KEYS', '*') };
        $counted >= $admitted && $counted <= $admitted + $left;
    }, 5);
    cmp_ok($admitted, '>', 2000, "wrk's subjects admitted ($admitted)");
    cmp_ok($left, '<=', 4, "requests cut by wrk's stop while undecided: $left, one a connection at most");
    ok($counted >= $admitted && $counted <= $admitted + $left,
       "evicted leases gave back every unit: Redis counts the $admitted admitted and "
       . ($counted - $admitted) . " of the $left cut undecided");
}

# --- fail local: a flood of subjects does not free a limited one -----------
# 64k of local memory holds some 500 subjects.  A subject at its limit is
# forgotten only when the oldest 16 all are: floods of new subjects, in
# another zone or in its own, make room among themselves.  Local counts
# are of fixed windows on the clock (a minute here, from the epoch): the
# victim starts in one with 20 s left at least, longer than both floods
# take, or its count would end with the window and it would rightly pass.

{
    $t->stop_redis;
    RateLimitTest::sleep_until_phase(60, 0.05) if 60 - time() % 60 < 20;
    my $window_end = (int(time() / 60) + 1) * 60;
    my @v = map { $t->get('/vl/index.html', { 'X-Api-Key' => 'victim' })->{status} } 1 .. 4;
    is("@v", '200 200 200 429', 'fail local: the victim reaches its limit of 3');
    wrk(1, '/fl/index.html', 'return "f" .. n');
    is($t->get('/vl/index.html', { 'X-Api-Key' => 'victim' })->{status}, 429,
       'fail local: after a flood of new subjects in another zone, the victim is still limited');
    wrk(1, '/vl/index.html', 'return "g" .. n');
    is($t->get('/vl/index.html', { 'X-Api-Key' => 'victim' })->{status}, 429,
       'fail local: after a flood of new subjects in its own zone, the victim is still limited');
    cmp_ok(time(), '<', $window_end, "the victim was asked again within its window's minute");
    my $flood = grep { $_->{uri} eq '/fl/index.html' && $_->{rs} eq 'PASSED' } $t->access_entries;
    cmp_ok($flood, '>', 2000, "the flood passed ($flood requests), decided locally");

    # Redis is down: a cost of 0 gets the fail policy as any cost does.
    is(status_rs('/c/index.html', { 'X-Api-Key' => 'cost', 'X-Cost' => '0' }), '503 ERROR',
       'Redis down, fail closed: a cost of 0 is refused too');
}

$t->no_alerts;
done_testing();
