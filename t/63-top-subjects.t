#!/usr/bin/perl
# The fleet's top subjects of a rate zone (issue 45).  Two nginx servers of
# two workers each, one Redis; zone s keeps its top (top=64), zone n has
# top=off.  A seeded load of 300 subjects, subject i sent
# int(1000 / i^1.5) + 1 times (i = 1..300), shuffled, alternating servers,
# under a limit of 30 a minute: the heaviest subjects are refused; its
# second half in a later 2 s slice than its first.  The
# test knows each subject's true requests and rejections from the
# answers (200 or 429).
#
# Expected: once `to` of GET /q?zone=s&top=N covers the load's slices (it
# does within 2 s + 2 s of the load's end, a slice and the read's wait
# for every server's flush: asserted within 5 s), the top
# 5 by rejections and by requests are the true top 5, in order (the true
# counts of the 5th and 6th differ by more than twice the stated bound, so
# no tie or approximation may reorder them: asserted first); every
# subject reported is within error_bound of its true requests and
# rejections; the totals are exact; share = rejected / the zone's
# rejected, 3 decimals; key_hex the key's bytes; window 60 = to - from.
# top= with a zone that has top=off, a concurrency zone, an unknown zone,
# no zone, N of 0, 101 or not a number: 400 with {"error":...}.  Redis
# down: 503, and the slice it could not take dropped and counted in
# nginx_ratelimit_redis_errors_total{kind="top_dropped"}.  The flush's keys live a little over a minute.  A key of 103
# bytes is reported as its first 44, "...#" and its FNV-1a hash.  After a
# reload, the API still answers.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use List::Util qw(shuffle);
use Time::HiRes qw(time sleep);
use RateLimitTest;
use ClusterTest;
use PromText;

# The time slices the servers count in (src/top/top_script.hpp kTopSliceS).
my $SLICE = 2;

RateLimitTest::require_module();

my $t  = RateLimitTest->new(workers => 2);
my $t2 = RateLimitTest->new(workers => 2);
$t->start_redis;
my $REDIS_PORT = $t->redis_port;

my $conf = <<"EOF" . <<'EOF';
ratelimit_redis 127.0.0.1:$REDIS_PORT timeout=2s;
EOF
ratelimit_zone s key=$http_x_api_key limit=30 window=60s top=64;
ratelimit_zone n key=$http_x_api_key limit=30 window=60s top=off;
ratelimit_zone c key=$http_x_api_key concurrency=2;
server {
    listen 127.0.0.1:%%PORT%% reuseport;
    location /s/ { ratelimit zone=s; alias %%TMP%%/html/; }
    location /n/ { ratelimit zone=n; alias %%TMP%%/html/; }
    location /c/ { ratelimit zone=c; alias %%TMP%%/html/; }
    location = /q { ratelimit_query zone=s zone=n zone=c; }
    location = /metrics { ratelimit_metrics; }
}
EOF
$t->write_conf($conf);
$t2->write_conf($conf);
my @SERVERS = ($t, $t2);
$_->start_nginx for @SERVERS;

sub top {
    my ($srv, $query) = @_;
    my $r = $srv->get("/q?$query");
    my $body = eval { decode_json($r->{content}) };
    return ($r->{status}, $body);
}

# A subject as the top keeps it: up to 64 bytes; a longer one as its first
# 44 bytes, "...#" and 16 hex digits of its 64-bit FNV-1a hash.
sub stored {
    my ($key) = @_;
    return $key if length $key <= 64;
    use integer;
    my $h = -3750763034362895579;    # 0xcbf29ce484222325
    for my $c (unpack 'C*', $key) {
        $h ^= $c;
        $h *= 1099511628211;
    }
    no integer;
    return substr($key, 0, 44) . '...#' . sprintf('%016x', $h);
}

# --- the load --------------------------------------------------------------
# Subject 3's key is 103 bytes long: reported in its stored form.
my $LONG = 'u3-' . ('x' x 100);
srand(45);
my @sends;
for my $i (1 .. 300) {
    push @sends, ($i == 3 ? $LONG : "u$i") x (int(1000 / $i**1.5) + 1);
}
@sends = shuffle(@sends);

my (%requests, %rejected);
my ($total, $total_rejected, $bad) = (0, 0, 0);
my $start = time;
for my $n (0 .. $#sends) {
    # Half the load in one slice, half in the next at least: the read sums
    # slices as well as servers.
    sleep(int(time / $SLICE) * $SLICE + $SLICE + 0.1 - time) if $n == int(@sends / 2);
    my $status = $SERVERS[$n % 2]->get('/s/index.html', { 'X-Api-Key' => $sends[$n] })->{status};
    my $key = stored($sends[$n]);
    $requests{$key}++;
    $total++;
    if ($status == 429) {
        $rejected{$key}++;
        $total_rejected++;
    } elsif ($status != 200) {
        $bad++;
    }
}
my $end = time;
is($bad, 0, 'every request answered 200 or 429');
note(sprintf '%d requests, %d refused, in %.1f s', $total, $total_rejected, $end - $start);
ok($end - $start < 45, 'the load fits in the minute read');

# --- wait for the flush of the load's slices: `to` covers them -----------
my $covered = int($end / $SLICE) * $SLICE + $SLICE;
my $answer;
my $seen = RateLimitTest::wait_until(sub {
    my ($status, $body) = top($t, 'zone=s&top=100');
    $answer = $body if $status == 200;
    return $status == 200 && $body->{to} >= $covered;
}, 15);
ok(defined $seen, 'the load\'s slices are read within 15 s of its end')
    or BAIL_OUT('no answer covering the load');
ok($seen - $end <= 5, sprintf 'fresh: covered %.1f s after the load ended (at most 5)', $seen - $end);

my ($status2, $answer2) = top($t2, 'zone=s&top=5');
is($status2, 200, 'server 2 answers too');

is($answer->{zone}, 's', 'zone');
is($answer->{window}, 60, 'window 60');
is($answer->{to} - $answer->{from}, 60, 'from is a minute before to');
ok($answer->{from} <= int($start / $SLICE) * $SLICE, 'the span covers the load\'s start');
is($answer->{requests}, $total, "the zone's requests exact ($total)");
is($answer->{rejected}, $total_rejected, "the zone's rejections exact ($total_rejected)");
my $bound = $answer->{error_bound};
note("error_bound $bound");

sub true_top {
    my ($counts) = @_;
    return sort { $counts->{$b} <=> $counts->{$a} || $a cmp $b } keys %$counts;
}
my @true_rej = true_top(\%rejected);
my @true_req = true_top(\%requests);
ok($rejected{$true_rej[4]} - ($rejected{$true_rej[5]} // 0) > 2 * $bound,
    'the true 5th and 6th by rejections stand apart by more than twice the bound');
ok($requests{$true_req[4]} - $requests{$true_req[5]} > 2 * $bound,
    'the true 5th and 6th by requests stand apart by more than twice the bound');

my @got_rej = map { $_->{key} } @{ $answer->{top_rejected} };
my @got_req = map { $_->{key} } @{ $answer->{top_requests} };
is("@got_rej[0..4]", "@true_rej[0..4]", 'top 5 by rejections: the true top 5, in order');
is("@got_req[0..4]", "@true_req[0..4]", 'top 5 by requests: the true top 5, in order');
is(join(' ', map { $_->{key} } @{ $answer2->{top_rejected} }), "@true_rej[0..4]",
    'top=5 on the other server: the same five');

my ($off, $shares, $hex) = (0, 0, 0);
for my $s (@{ $answer->{top_rejected} }, @{ $answer->{top_requests} }) {
    my $k = $s->{key};
    if (abs($s->{requests} - ($requests{$k} // 0)) > $bound
        || abs($s->{rejected} - ($rejected{$k} // 0)) > $bound)
    {
        $off++;
        diag("$k: $s->{requests}/$s->{rejected}, truly "
             . ($requests{$k} // 0) . '/' . ($rejected{$k} // 0));
    }
    $shares++ if $s->{share} != 0 + sprintf('%.3f', $s->{rejected} / $total_rejected);
    $hex++ if $s->{key_hex} ne unpack('H*', $k);
}
is($off, 0, 'every subject reported within error_bound of its true counts');
is($shares, 0, 'share = its rejected / the zone\'s, 3 decimals');
is($hex, 0, 'key_hex: the key\'s bytes');
is(scalar(grep { $_->{rejected} == 0 } @{ $answer->{top_rejected} }), 0,
    'top_rejected: subjects with rejections only');
is(scalar @{ $answer->{top_requests} }, 100, 'top=100: 100 subjects by requests');
is($got_req[2], stored($LONG), "a key over 64 bytes: its first 44, '...#' and its hash ($got_req[2])");

my @keys = $t->redis_keys('rl:s!top:*');
ok(@keys >= 3, 'the flushed slices\' keys: ' . scalar @keys);
my $pttl = $t->redis('PTTL', $keys[0]);
ok($pttl > 55_000 && $pttl <= 70_000, "they live a little over a minute ($pttl ms)");
is(scalar(my @none = $t->redis_keys('rl:n!top:*')), 0, 'a zone with top=off flushes nothing');

# --- bad requests ----------------------------------------------------------
for my $case (['zone=n&top=5', 'top=off'], ['zone=c&top=5', 'a concurrency zone'],
              ['zone=x&top=5', 'an unknown zone'], ['top=5', 'no zone'],
              ['zone=s&top=0', 'top=0'], ['zone=s&top=101', 'top=101'],
              ['zone=s&top=ten', 'top=ten'])
{
    my ($status, $body) = top($t, $case->[0]);
    is($status, 400, "$case->[1]: 400");
    ok(defined $body && length($body->{error} // ''), "$case->[1]: its error: "
        . ($body->{error} // 'none'));
}

# --- a reload keeps the memory of the tops (same zones) ----------------------
$t->reload;
my ($again, $after) = top($t, 'zone=s&top=5');
is($again, 200, 'after a reload: 200');

# --- Redis down -------------------------------------------------------------
# A slice counted, then Redis gone before its flush: dropped, counted.
my $dropped = PromText::value(PromText::scrape($t), 'nginx_ratelimit_redis_errors_total',
                              kind => 'top_dropped');
sleep(int(time / $SLICE) * $SLICE + $SLICE + 0.2 - time) if time - int(time / $SLICE) * $SLICE > $SLICE - 1;
is($t->get('/s/index.html', { 'X-Api-Key' => 'late' })->{status}, 200, 'a request before Redis goes');
$t->stop_redis;
my ($down) = top($t, 'zone=s&top=5');
is($down, 503, 'Redis down: 503');
ok(RateLimitTest::wait_until(sub {
    PromText::value(PromText::scrape($t), 'nginx_ratelimit_redis_errors_total',
                    kind => 'top_dropped') > $dropped;
}, 10), 'its slice dropped: redis_errors_total{kind="top_dropped"} counts it');

$_->stop_nginx for @SERVERS;
$_->no_alerts for @SERVERS;

# --- a Redis Cluster: each slice's keys in the zone's hash tag's slot -----
my $tc = RateLimitTest->new(workers => 2);
my $c = ClusterTest->new($tc, masters => 3, replicas => 0);
$c->start(20);
$tc->write_conf('ratelimit_redis cluster ' . $c->seeds . " timeout=2s;\n" . <<'EOF');
ratelimit_zone s key=$http_x_api_key limit=3 window=60s top=8;
server {
    listen 127.0.0.1:%%PORT%%;
    location /s/ { ratelimit zone=s; alias %%TMP%%/html/; }
    location = /q { ratelimit_query zone=s; }
}
EOF
$tc->start_nginx;
my %sent;
for my $n (0 .. 59) {
    my $key = 'c' . ($n % 4 == 0 ? 1 : $n % 12);
    my $st = $tc->get('/s/index.html', { 'X-Api-Key' => $key })->{status};
    $sent{$st}++;
}
my $cend = time;
my $cover = int($cend / $SLICE) * $SLICE + $SLICE;
my $cans;
RateLimitTest::wait_until(sub {
    my ($status, $body) = top($tc, 'zone=s&top=3');
    $cans = $body if $status == 200;
    return $status == 200 && $body->{to} >= $cover;
}, 15);
ok($cans && $cans->{to} >= $cover, 'cluster: the load\'s slice is read');
is($cans && $cans->{requests}, 60, 'cluster: requests exact');
is($cans && $cans->{rejected}, $sent{429}, "cluster: rejections exact ($sent{429})");
is($cans && $cans->{top_rejected}[0]{key}, 'c1', 'cluster: the most refused first');
my $master = $c->master_of(ClusterTest::keyslot('{rl:s!top}'));
my @ckeys = @{ $c->node($master, 'KEYS', '{rl:s!top}:*') };
ok(@ckeys >= 3, 'cluster: the slice\'s keys on the master of the tag\'s slot: ' . scalar @ckeys);
$tc->stop_nginx;
$tc->no_alerts;
done_testing();
