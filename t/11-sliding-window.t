#!/usr/bin/perl
# Sliding window: requests expire bucket by bucket; idle subjects start fresh.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use RateLimitTest qw(parse_ratelimit sleep_until_phase hdr);

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 1);
$t->start_redis;
my $CONF = <<'EOF';
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=1s;
ratelimit_zone sl   key=$http_x_api_key limit=4 window=2s bucket=500ms;
ratelimit_zone idle key=$http_x_api_key limit=3 window=1s;
ratelimit_zone dflt key=$http_x_api_key limit=2 window=1s;
ratelimit_zone dflt2 key=$http_x_api_key limit=2 window=2s;
ratelimit_zone fine key=$http_x_api_key limit=2 window=2s bucket=1ms;
ratelimit_zone step key=$http_x_api_key limit=10 window=60s bucket=1s;

server {
    listen 127.0.0.1:%%PORT%%;
    location /sl/   { ratelimit zone=sl;   alias %%TMP%%/html/; }
    location /idle/ { ratelimit zone=idle; alias %%TMP%%/html/; }
    location /dflt/ { ratelimit zone=dflt; alias %%TMP%%/html/; }
    location /dflt2/ { ratelimit zone=dflt2; alias %%TMP%%/html/; }
    location /fine/ { ratelimit zone=fine; alias %%TMP%%/html/; }
    location /step/ { ratelimit zone=step; alias %%TMP%%/html/; }
}
EOF
$t->write_conf($CONF);
$t->start_nginx;

# warm up the connection to redis (not counted against the subjects below)
$t->get_as('sl', 'warmup');

# --- bucket boundaries: limit=4 window=2s bucket=500ms ----------------------

{
    # start just after a 500ms boundary so that bucket arithmetic is predictable
    my $t0 = sleep_until_phase(0.5, 0.05);
    my $r1 = $t->get_as('sl', 's1');
    my $r2 = $t->get_as('sl', 's1');
    is($r1->{status} . ' ' . $r2->{status}, '200 200', 't0: 2 admitted');
    is(hdr($r2, 'X-RateLimit-Remaining'), 2, 't0: remaining 2');

    sleep($t0 + 1.0 - time);
    my $r3 = $t->get_as('sl', 's1');
    my $r4 = $t->get_as('sl', 's1');
    is($r3->{status} . ' ' . $r4->{status}, '200 200', 't0+1s: 2 more admitted');
    is(hdr($r4, 'X-RateLimit-Remaining'), 0, 't0+1s: remaining 0');
    my ($rl4) = parse_ratelimit(hdr($r4, 'RateLimit'));
    # the oldest requests (bucket of t0) leave the window ~0.95s later
    is($rl4 && $rl4->{t}, 1, 't0+1s: t = 1 (oldest requests leave in < 1s)');

    my $r5 = $t->get_as('sl', 's1');
    is($r5->{status}, 429, 't0+1s: 5th rejected');
    is(hdr($r5, 'Retry-After'), 1, 't0+1s: Retry-After 1');

    # still full shortly before the first bucket leaves (t0+1.7s)
    sleep($t0 + 1.7 - time);
    is($t->get_as('sl', 's1')->{status}, 429, 't0+1.7s: still rejected');

    # t0+2.2s: the two requests of t0 have left, the two of t0+1s have not
    sleep($t0 + 2.2 - time);
    my @s = map { $t->get_as('sl', 's1') } 1 .. 3;
    is(join(' ', map { $_->{status} } @s), '200 200 429', 't0+2.2s: exactly 2 admitted again');
    is(hdr($s[0], 'X-RateLimit-Remaining'), 1, 't0+2.2s: remaining 1 after first');
    my ($rl) = parse_ratelimit(hdr($s[2], 'RateLimit'));
    # oldest remaining requests are the t0+1s ones: they leave at ~t0+3s
    ok($rl && $rl->{t} == 1, 't0+2.2s: t = 1 (t0+1s requests leave at ~t0+3s)')
        or diag(hdr($s[2], 'RateLimit'));
    ok(elapsed_ok($t0, 2.45), 'timing of this test was not disturbed');

    # t0+3.2s: the t0+1s pair has left; the t0+2.2s pair remains
    sleep($t0 + 3.2 - time);
    my @s2 = map { $t->get_as('sl', 's1')->{status} } 1 .. 3;
    is("@s2", '200 200 429', 't0+3.2s: exactly 2 admitted again');
    is($t->redis_window_total('rl:sl:s1') >= 4, 1, 'redis holds at least the counted requests');
}

sub elapsed_ok {
    my ($t0, $max) = @_;
    return time - $t0 < $max;
}

# --- sliding: total in window never exceeds limit (continuous load) --------

{
    # one request every 100ms for 3 s against limit=4/2s: every admitted
    # request must have at most 3 other admitted ones in the preceding 2s
    my @admitted;
    my $start = sleep_until_phase(0.5, 0.02);
    my $n200 = 0;
    for my $i (0 .. 29) {
        sleep($start + $i * 0.1 - time) if $start + $i * 0.1 > time;
        my $ts = time;
        my $r = $t->get_as('sl', 's2');
        push @admitted, $ts if $r->{status} == 200;
    }
    my $viol = 0;
    for my $i (0 .. $#admitted) {
        # with 500ms buckets a request stays counted for more than 1.5s
        my $in = grep { $_ > $admitted[$i] - 1.45 && $_ <= $admitted[$i] } @admitted;
        $viol++ if $in > 4;
    }
    is($viol, 0, 'never more than 4 admitted within any 1.45s interval');
    ok(@admitted >= 5 && @admitted <= 8, 'continuous load over 3s: 5..8 admitted (' . scalar(@admitted) . ')');
}

# --- idle subject starts fresh ---------------------------------------------

{
    my @s = map { $t->get_as('idle', 'i1')->{status} } 1 .. 4;
    is("@s", '200 200 200 429', 'idle zone: 3 admitted, 4th rejected');
    sleep 1.3;
    my $r = $t->get_as('idle', 'i1');
    is($r->{status}, 200, 'after more than a window idle: admitted');
    is(hdr($r, 'X-RateLimit-Remaining'), 2, 'after idle: full limit available (remaining 2)');
    my @s2 = map { $t->get_as('idle', 'i1')->{status} } 1 .. 3;
    is("@s2", '200 200 429', 'after idle: limit is 3 again');
}

# --- default bucket size (window 1s -> 20ms buckets) -------------------------

{
    my $t0 = sleep_until_phase(1, 0.05);
    my @s = map { $t->get_as('dflt', 'd1')->{status} } 1 .. 3;
    is("@s", '200 200 429', 'default buckets: 2 admitted, 3rd rejected');
    # with 20ms buckets the requests leave ~1s later, well before 1.2s
    sleep($t0 + 1.2 - time);
    my $r = $t->get_as('dflt', 'd1');
    is($r->{status}, 200, 'default buckets: admitted again ~1.2s later');
    is(hdr($r, 'X-RateLimit-Remaining'), 1, 'default buckets: both old requests left');
}

# default buckets for a 2s window are 40ms long: requests made in the middle of
# a 2s period stay counted for (almost) the whole 2s, not just until the end of
# a coarse bucket
{
    my $t0 = sleep_until_phase(2, 1.0);
    my @r = map { $t->get_as('dflt2', 'd2') } 1 .. 3;
    is(join(' ', map { $_->{status} } @r), '200 200 429', 'window=2s: 2 admitted, 3rd rejected');
    is(hdr($r[2], 'Retry-After'), 2, 'window=2s default buckets: Retry-After 2 (oldest leaves in ~1.96s)');
    sleep($t0 + 1.5 - time);
    is($t->get_as('dflt2', 'd2')->{status}, 429, 'window=2s: still rejected 1.5s later');
    sleep($t0 + 2.1 - time);
    is($t->get_as('dflt2', 'd2')->{status}, 200, 'window=2s: admitted again 2.1s later');
}

# 2000 buckets of 1 ms, live ones 1.5 s apart: sliding past the old one
# means stepping over 1500 empty bucket numbers; in a hash the script gives
# up stepping after 64 and reads the hash once, a packed string it reads
# whole; the counts stay exact.  Subject `subject`, new keys in `layout`.
# With the Redis module loaded its command decides, and reads a hash
# through the module API: no HGETALL to count.
my $command = grep { ref $_ eq 'ARRAY' && "@$_" =~ /\bratelimit\b/ }
    @{ $t->redis('MODULE', 'LIST') };
sub sparse_buckets {
    my ($subject, $layout) = @_;
    my $calls = sub {
        my ($stats) = $t->redis('INFO', 'commandstats') =~ /cmdstat_hgetall:calls=(\d+)/;
        return $stats // 0;
    };
    my $t0 = time;
    is($t->get_as('fine', $subject)->{status}, 200, "sparse buckets, $layout: 1st admitted");
    sleep($t0 + 1.5 - time);
    my @r = map { $t->get_as('fine', $subject) } 1 .. 2;
    is(join(' ', map { $_->{status} } @r), '200 429', "sparse buckets, $layout: 2nd admitted, 3rd rejected");
    my $before = $calls->();
    sleep($t0 + 2.2 - time);
    @r = map { $t->get_as('fine', $subject) } 1 .. 2;
    is(join(' ', map { $_->{status} } @r), '200 429',
       "sparse buckets, $layout: the 1st left the window: one more admitted, then rejected");
    is(hdr($r[0], 'X-RateLimit-Remaining'), 0, "sparse buckets, $layout: remaining 0 (2 counted)");
    if ($layout eq 'hash') {
        SKIP: {
            skip 'the Redis module\'s command reads a hash through the module API, no HGETALL', 1
                if $command;
            cmp_ok($calls->(), '>', $before, 'sparse buckets, hash: the hash was read once instead of stepping');
        }
    } else {
        is($calls->(), $before, 'sparse buckets, packed: the string read whole, no HGETALL');
    }
    is($t->redis('TYPE', "rl:fine:$subject"), $layout eq 'hash' ? 'hash' : 'string',
       "sparse buckets, $layout: the key is in that layout");
    is($t->redis_window_total("rl:fine:$subject"), 2, "sparse buckets, $layout: Redis holds the 2 live counts");
}

sparse_buckets('f1', 'packed');
(my $hash_conf = $CONF) =~ s/timeout=1s;/timeout=1s layout=hash;/ or die;
$t->write_conf($hash_conf);
$t->reload;
sparse_buckets('f2', 'hash');

# Redis's clock stepped back (a failover to a replica 2 s behind): the key's
# newest bucket lies in the future, and its counts must go on counting.
{
    my ($now) = @{ $t->redis('TIME') };
    $t->redis('HSET', 'rl:step:s1', 't', 5, 'o', $now - 5, 'n', $now + 2,
              $now - 5, 2, $now + 2, 3);
    $t->redis('PEXPIRE', 'rl:step:s1', 60000);
    my $r = $t->get_as('step', 's1');
    is($r->{status}, 200, 'clock stepped back: admitted');
    is(hdr($r, 'X-RateLimit-Remaining'), 4, 'clock stepped back: the 5 counts made "ahead" still count');
}

$t->stop_nginx;
$t->no_alerts;

done_testing;
