#!/usr/bin/perl
# Status API with ?interval=: per zone, the requests of the subject in the
# last N seconds, summed from the buckets that overlap that span.
#
# Expected (spec: docs/operations.md "Status API"): interval=T, in nginx time syntax,
# sums the current bucket and the k - 1 before it, k = ceil(T / bucket),
# and says so: "interval" (T) and "interval_summed" (k x bucket) in seconds
# with milliseconds, "count_in_interval" the sum; nothing is counted.  A
# fixed window answers the count of its current window, summed over the
# whole window, with an "interval_note".  T longer than a zone's window,
# zero or not a time answers 400 with a JSON error naming the zone if it
# is one.  Without interval= the answer has none of these fields.
#
# Counts are written by the test in the documented layout (docs/operations.md
# "Redis data layout"), the bucket numbers from Redis's TIME; a check that ends in
# another second than it began is done again, so the test does not race
# the clock.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep);
use POSIX qw(floor);
use List::Util qw(sum);
use JSON::PP ();
use RateLimitTest;

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 1);
$t->start_redis;
$t->write_conf(<<'EOF');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=1s;
ratelimit_zone ten key=$http_x_api_key limit=100 window=10s bucket=1s;
ratelimit_zone min key=$http_x_api_key limit=100 window=60s;
ratelimit_zone fix key=$http_x_api_key limit=5 window=10s algorithm=fixed;

server {
    listen 127.0.0.1:%%PORT%%;
    location /ten/ { ratelimit zone=ten; alias %%TMP%%/html/; }
    location /fix/ { ratelimit zone=fix; alias %%TMP%%/html/; }

    location = /q    { ratelimit_query zone=ten; }
    location = /both { ratelimit_query zone=min zone=ten; }
    location = /qf   { ratelimit_query zone=fix; }
}
EOF
$t->start_nginx;

my $JSON = JSON::PP->new->utf8;

# GET a status URL: (status, decoded JSON or undef, body).
sub query {
    my ($uri) = @_;
    my $r = $t->get($uri);
    return ($r->{status}, eval { $JSON->decode($r->{content}) }, $r->{content});
}

sub second { floor($t->redis_time_ms / 1000) }

# Runs `check` (which returns its results) until it starts and ends in one
# Redis second, at most 5 times; waits for the start of a second first, so
# the check has most of one.
sub in_one_second {
    my ($check) = @_;
    for (1 .. 5) {
        sleep((1000 - $t->redis_time_ms % 1000) / 1000 + 0.01);
        my $start = second();
        my @got = $check->($start);
        return @got if second() == $start;
    }
    BAIL_OUT('five checks in a row crossed a Redis second');
}

# Writes subject `s` of zone ten with counts {bucket offset from `now` =>
# count}, as the module's layout has it.
sub write_subject {
    my ($s, $now, %counts) = @_;
    my $key = "rl:ten:$s";
    my @ids = sort { $a <=> $b } map { $now - $_ } keys %counts;
    $t->redis('DEL', $key);
    $t->redis('HSET', $key, t => sum(values %counts), o => $ids[0], n => $ids[-1],
              map { ($now - $_ => $counts{$_}) } keys %counts);
    $t->redis('PEXPIREAT', $key, ($ids[-1] + 10) * 1000);
}

# --- counts in known buckets ------------------------------------------------------

# Buckets now, now-1, now-2, now-5 and now-9 hold 1, 2, 4, 8 and 16.
my %WANT = ('1s' => 1, '3s' => 7, '6s' => 15, '10s' => 31, '500ms' => 1, '2500ms' => 7,
            '9s' => 15, '4' => 7);
my %SUMMED = ('1s' => '1.000', '3s' => '3.000', '6s' => '6.000', '10s' => '10.000',
              '500ms' => '1.000', '2500ms' => '3.000', '9s' => '9.000', '4' => '4.000');
my %ASKED = ('1s' => '1.000', '3s' => '3.000', '6s' => '6.000', '10s' => '10.000',
             '500ms' => '0.500', '2500ms' => '2.500', '9s' => '9.000', '4' => '4.000');
{
    my %got = in_one_second(sub {
        my ($now) = @_;
        write_subject('w1', $now, 0 => 1, 1 => 2, 2 => 4, 5 => 8, 9 => 16);
        return map { ($_ => [query("/q?key=w1&interval=$_")]) } keys %WANT;
    });
    for my $interval (sort keys %got) {
        my ($status, $j, $body) = @{ $got{$interval} };
        is($status, 200, "interval=$interval: 200") or diag($body);
        my $o = ref $j eq 'ARRAY' ? $j->[0] : {};
        is($o->{count_in_interval}, $WANT{$interval}, "interval=$interval: count_in_interval $WANT{$interval}");
        is($o->{used}, 31, "interval=$interval: used 31, the whole window");
        like($body, qr/"interval":\Q$ASKED{$interval}\E,"interval_summed":\Q$SUMMED{$interval}\E,/,
             "interval=$interval: interval $ASKED{$interval}, summed $SUMMED{$interval} s");
        ok(!exists $o->{interval_note}, "interval=$interval: no note for a sliding window");
    }
    is($t->redis_window_count('rl:ten:w1'), 31, 'the queries counted nothing');
}

# --- counts made by requests --------------------------------------------------------

{
    my ($first, $all, @status) = in_one_second(sub {
        $t->redis('DEL', 'rl:ten:r1');
        my @s = map { $t->get('/ten/index.html', { 'X-Api-Key' => 'r1' })->{status} } 1 .. 3;
        my (undef, $j1) = query('/q?key=r1&interval=1s');
        my (undef, $j10) = query('/q?key=r1&interval=10s');
        return ($j1 && $j1->[0]{count_in_interval}, $j10 && $j10->[0]{count_in_interval}, @s);
    });
    is("@status", '200 200 200', 'three counted requests pass');
    is($first, 3, 'interval=1s: the three requests of this second');
    is($all, 3, 'interval=10s: the same three');
}

# --- a subject never seen, key_hex, several zones ------------------------------------

{
    my ($status, $j, $body) = query('/q?key=nobody&interval=3s');
    is($status, 200, 'never seen: 200');
    is($j && $j->[0]{count_in_interval}, 0, 'never seen: count_in_interval 0');
    is($j && $j->[0]{used}, 0, 'never seen: used 0');

    ($status, $j) = query('/both?key_hex=' . unpack('H*', 'nobody') . '&interval=5s');
    is($status, 200, 'two zones, key_hex: 200');
    is(join(',', map { "$_->{zone}:$_->{count_in_interval}:$_->{interval_summed}" } @{ $j // [] }),
       'min:0:5,ten:0:5', 'two zones, key_hex: each answers the interval');
}

# --- no interval asked: the answer as before ----------------------------------------

{
    my ($status, $j) = query('/q?key=w1');
    is(join(',', sort keys %{ $j && $j->[0] || {} }),
       join(',', sort qw(zone key limit used remaining window reset retry_after)),
       'without interval=: no interval fields');
}

# --- a fixed window -----------------------------------------------------------------

{
    my @s = map { $t->get('/fix/index.html', { 'X-Api-Key' => 'f1' })->{status} } 1 .. 2;
    is("@s", '200 200', 'fixed window: two requests pass');
    my ($status, $j, $body) = query('/qf?key=f1&interval=3s');
    is($status, 200, 'fixed window, interval=3s: 200');
    my $o = $j && $j->[0] || {};
    # The two requests may straddle a window boundary: the count is the
    # current window's, whatever it is.
    is($o->{count_in_interval}, $o->{used}, 'fixed window: count_in_interval is the window\'s count');
    ok(defined $o->{used} && $o->{used} >= 1, "fixed window: used $o->{used}");
    like($body, qr/"interval":3\.000,"interval_summed":10\.000,/, 'fixed window: the whole window summed');
    is($o->{interval_note}, 'fixed window: the count of its current window',
       'fixed window: says it cannot do better');
}

# --- bad intervals ------------------------------------------------------------------

sub check_error {
    my ($what, $uri, $like) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my ($status, $j, $body) = query($uri);
    is($status, 400, "$what: 400");
    like($j && $j->{error} // '', $like, "$what: the error says why") or diag($body);
}

check_error('interval=11s', '/q?key=w1&interval=11s', qr/longer than the window of zone ten, 10000 ms/);
check_error('interval=10001ms', '/q?key=w1&interval=10001ms', qr/zone ten/);
check_error('interval=30s over two zones', '/both?key=w1&interval=30s', qr/zone ten\b/);
check_error('interval=2m over two zones', '/both?key=w1&interval=2m', qr/zone min\b/);
check_error('interval=abc', '/q?key=w1&interval=abc', qr/interval must be a time/);
check_error('interval=0s', '/q?key=w1&interval=0s', qr/interval must be a time/);
check_error('interval= (empty)', '/q?key=w1&interval=', qr/interval must be a time/);
check_error('interval=-1s', '/q?key=w1&interval=-1s', qr/interval must be a time/);
check_error('no key, good interval', '/q?interval=1s', qr/missing key/);

$t->stop_nginx;
$t->no_alerts;
done_testing;
