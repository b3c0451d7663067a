#!/usr/bin/perl
# A cost per request (issue 26): `ratelimit zone=NAME cost=N|$var;`.
#
# Expected (spec-26 section 2):
# - a request is admitted only if used + cost <= limit in every zone that
#   applies (cost=0: while used < limit), and then each zone counts its
#   cost; a rejected request counts in none; so a random sequence of costs
#   against one subject, sent one after another, is decided exactly as the
#   model says, the first rejection coming when the next cost does not fit;
# - cost=0 checks without counting (no key is made); a cost above the limit
#   is always rejected;
# - a cost from a variable that is empty or no whole number 0..2^53 gets the
#   zone's ratelimit_fail (open: passed, ERROR; closed: 503), is counted
#   nowhere, and is logged at [error] at most once a second per worker,
#   naming the zone and the value; a constant that is no such number fails
#   nginx -t with file:line;
# - two zones with their own costs on one location: all or nothing (Redis's
#   "t" of each key); a dry-run zone the cost does not fit counts nothing;
# - the RateLimit headers count units (remaining = limit - units used);
# - two servers of two workers each on one Redis, one subject, random costs
#   at once: the units admitted never exceed the limit and are Redis's "t",
#   and the admitted requests were counted one after another.
#
# The random costs come from a seed printed at the start (RATELIMIT_SEED=N
# repeats a run).

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use RateLimitTest qw(parse_ratelimit hdr sleep_until_phase);
use PromText;

RateLimitTest::require_module();

my $SEED = $ENV{RATELIMIT_SEED} // int(rand(1e6));
diag("random seed: $SEED (RATELIMIT_SEED=$SEED repeats this run)");
srand($SEED);

my $MAX = '9007199254740992';    # 2^53

my $t  = RateLimitTest->new(workers => 2);
my $t2 = RateLimitTest->new(workers => 2);
$t->start_redis;
my $REDIS_PORT = $t->redis_port;

# --- nginx -t: constant costs ------------------------------------------------------

sub conf_t {
    my ($directive) = @_;
    $t->write_conf(<<"EOF");
ratelimit_redis 127.0.0.1:$REDIS_PORT;
ratelimit_zone api key=\$http_x_api_key limit=100 window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    location /x/ {
        $directive
        alias %%TMP%%/html/;
    }
}
EOF
    my $line = $t->conf_line(qr/\Q$directive\E/);
    my ($st, $out) = $t->nginx_t;
    return ($st, $out, $line);
}

for my $ok ('ratelimit zone=api cost=0;', 'ratelimit zone=api cost=1;', 'ratelimit zone=api cost=250;',
            "ratelimit zone=api cost=$MAX;", 'ratelimit zone=api dry_run cost=3;',
            'ratelimit zone=api cost=$arg_cost;', 'ratelimit zone=api cost=${arg_a}0;')
{
    my ($st, $out) = conf_t($ok);
    is($st, 0, "nginx -t accepts: $ok") or diag($out);
}
for my $bad ('ratelimit zone=api cost=-1;', 'ratelimit zone=api cost=abc;', 'ratelimit zone=api cost=1.5;',
             'ratelimit zone=api cost=9007199254740993;', 'ratelimit zone=api cost=;',
             'ratelimit zone=api cost=1e3;', 'ratelimit zone=api cost=0x10;',
             'ratelimit zone=api cost=99999999999999999999999;', 'ratelimit zone=api cost=2 cost=3;')
{
    my ($st, $out, $line) = conf_t($bad);
    isnt($st, 0, "nginx -t refuses: $bad");
    like($out, qr/\[emerg\].*nginx\.conf:$line/, "  [emerg] with the file and line $line") or diag($out);
}

# --- the running servers -------------------------------------------------------------

my $CONF = <<"EOF" . <<'EOF';
ratelimit_redis 127.0.0.1:$REDIS_PORT timeout=2s;
EOF
ratelimit_zone api key=$http_x_api_key limit=100 window=60s;
ratelimit_zone fix key=$http_x_api_key limit=100 window=1h algorithm=fixed;
ratelimit_zone a   key=$http_x_api_key limit=10 window=60s;
ratelimit_zone b   key=$http_x_api_key limit=20 window=60s;
ratelimit_zone big key=$http_x_api_key limit=500 window=60s;
ratelimit_zone vl  key=$http_x_api_key limit=$arg_lim window=60s;

server {
    listen 127.0.0.1:%%PORT%% reuseport;
    add_header X-RL-Status "$ratelimit_status" always;
    add_header X-Cost "$arg_cost" always;
    location /c/   { ratelimit zone=api cost=$arg_cost; alias %%TMP%%/html/; }
    location /cc/  { ratelimit zone=api cost=$arg_cost; ratelimit_fail closed; alias %%TMP%%/html/; }
    location /c5/  { ratelimit zone=api cost=5; alias %%TMP%%/html/; }
    location /c0/  { ratelimit zone=api cost=0; alias %%TMP%%/html/; }
    location /one/ { ratelimit zone=api; alias %%TMP%%/html/; }
    location /f/   { ratelimit zone=fix cost=$arg_cost; alias %%TMP%%/html/; }
    location /ab/  { ratelimit zone=a cost=$arg_ca; ratelimit zone=b cost=$arg_cb;
                     alias %%TMP%%/html/; }
    location /abd/ { ratelimit zone=a cost=$arg_ca; ratelimit zone=b dry_run cost=$arg_cb;
                     alias %%TMP%%/html/; }
    location /big/ { ratelimit zone=big cost=$arg_cost; alias %%TMP%%/html/; }
    location /vl/  { ratelimit zone=vl cost=$arg_cost; alias %%TMP%%/html/; }
    location = /ratelimit { ratelimit_query zone=api; }
    location = /metrics { ratelimit_metrics; }
}
EOF
$_->write_conf($CONF) for $t, $t2;
$t->start_nginx;

sub get {
    my ($path, $key, %o) = @_;
    my $server = $o{server} // $t;
    return $server->get($path, { 'X-Api-Key' => $key });
}

sub st { my $r = shift; $r->{status} . '/' . (hdr($r, 'X-RL-Status') // '-') }

sub redis_t {
    my ($key) = @_;
    my $v = $t->redis_window_count($key);
    return $v // 0;
}

# Requests over one connection (one worker): "GET PATH" with the subject's header.
sub exchange {
    my ($key, @paths) = @_;
    return $t->raw_exchange(map {
        "GET $_ HTTP/1.1\r\nHost: localhost\r\nX-Api-Key: $key\r\n\r\n"
    } @paths);
}

# The error-log line about a bad cost: at [error], naming zone and value.
sub cost_line {
    my ($zone, $value) = @_;
    my $v = quotemeta $value;
    return qr/\[error\][^\n]*ratelimit: [^\n]*cost[^\n]*(?:"$v"[^\n]*zone "$zone"|zone "$zone"[^\n]*"$v")/;
}

# --- the default cost is 1; a constant cost; a variable's ------------------------

{
    my @r = (get('/one/index.html', 'd1'), get('/c5/index.html', 'd1'), get('/c/index.html?cost=2', 'd1'));
    is(join(' ', map { st($_) } @r), '200/PASSED 200/PASSED 200/PASSED', 'costs 1, 5 and 2 admitted');
    is(join(' ', map { hdr($_, 'X-RateLimit-Remaining') // '-' } @r), '99 94 92', 'remaining counts units: 99 94 92');
    is(redis_t('rl:api:d1'), 8, 'Redis counts 1 + 5 + 2 units');
    is($t->redis_window_total('rl:api:d1'), 8, 'the buckets hold 8 units');
    my @e = $t->access_entries_for(sub { $_->{uri} =~ m{^/(?:one|c5|c)/index\.html} && $_->{rs} eq 'PASSED' }, 3);
    is(join(' ', map { $_->{rem} } @e[0 .. 2]), '99 94 92', '$ratelimit_remaining counts units');
    my $q = get('/ratelimit?key=d1', 'd1')->{content};
    like($q, qr/"used":8,"remaining":92\b/, 'the status API counts units: used 8, remaining 92') or diag($q);
}

# --- a random sequence against the model ----------------------------------------------

# One subject, requests one after another (fresh connections, so either
# worker): admitted iff used + max(cost, 1) <= limit; then used += cost.
sub random_cost {
    my ($limit) = @_;
    my $x = rand;
    return $x < 0.10 ? 0
         : $x < 0.15 ? $limit + 1 + int(rand(3 * $limit))
         : $x < 0.25 ? 1
         : 1 + int(rand($limit / 4));
}

sub run_sequence {
    my ($loc, $zone, $key, $n, $one_connection) = @_;
    my $limit = 100;
    my $what = $loc . ($one_connection ? ', one connection' : '');
    my @costs = map { random_cost($limit) } 1 .. $n;
    # The model: what each request gets, the units used after it.
    my ($used, @fits, @after) = (0);
    my $model = sub {
        my ($cost) = @_;
        my $fits = $used + ($cost > 0 ? $cost : 1) <= $limit;
        $used += $cost if $fits;
        push @fits, $fits;
        push @after, $used;
    };
    $model->($_) for @costs;
    # Fill the rest exactly, then neither cost 0 nor cost 1 fits.
    my @all = @costs;
    push @all, $limit - $used if $used < $limit;
    $model->($all[-1]) if @all > @costs;
    push @all, 0, 1;
    $model->(0);
    $model->(1);
    my @paths = map { "/$loc/index.html?cost=$_" } @all;
    my @r = $one_connection ? exchange($key, @paths) : map { get($_, $key) } @paths;
    my (@want, @got, @bad_rem, $first_want, $first_got);
    for my $i (0 .. $#all) {
        my ($cost, $r) = ($all[$i], $r[$i] // { status => 0, headers => {} });
        push @want, "$cost:" . ($fits[$i] ? '200/PASSED' : '429/REJECTED');
        push @got, "$cost:" . st($r);
        # (costs above the limit never fit: the first rejection that counts
        # is the first of a cost the limit could hold)
        $first_want //= $i if !$fits[$i] && $cost <= $limit;
        $first_got //= $i if $r->{status} == 429 && $cost <= $limit;
        my $rem = hdr($r, 'X-RateLimit-Remaining') // -1;
        my ($rl) = parse_ratelimit(hdr($r, 'RateLimit'));
        my $rl_r = $rl ? $rl->{r} // -1 : -1;
        my $left = $limit - $after[$i];
        if ($r->{status} == 200) {
            push @bad_rem, "#$i cost $cost: remaining $rem/$rl_r, want $left"
                if $rem != $left || $rl_r != $left;
        }
        elsif ($rem < 0 || $rem > $left || $rl_r != $rem) {
            push @bad_rem, "#$i cost $cost rejected: remaining $rem/$rl_r, at most $left";
        }
    }
    note("$what costs: @all");
    is(join(' ', @got), join(' ', @want), "$what: " . scalar(@all) . ' requests of random costs decided as the model says')
        or diag("costs: @all");
    is($first_got, $first_want, "$what: the first rejection of a cost within the limit (request #"
        . ($first_want // '-') . ", $after[$first_want - 1] used + $all[$first_want]) comes exactly when it does not fit");
    is(scalar @bad_rem, 0, "$what: X-RateLimit-Remaining and RateLimit r= count units")
        or diag(join "\n", @bad_rem[0 .. ($#bad_rem < 9 ? $#bad_rem : 9)]);
    is(redis_t("rl:$zone:$key"), $limit, "$what: Redis's t is the sum admitted, the limit");
    return;
}

run_sequence('c', 'api', 'seq-s', 60);
# One worker answers all: its memory of rejections must not reject a cost
# that fits after a larger one was rejected.
run_sequence('c', 'api', 'seq-1', 60, 1);
{
    # A fixed window of an hour: the run must not cross an hour of Redis's clock.
    my $first = $t->redis_time_ms;
    SKIP: {
        skip 'less than 20 s to the next hour of Redis time (a fixed window of 1h)', 5
            if 3_600_000 - $first % 3_600_000 < 20_000;
        run_sequence('f', 'fix', 'seq-f', 60);
        is(int($t->redis_time_ms / 3_600_000), int($first / 3_600_000), 'fixed: the run stayed in one window');
    }
}

# --- limits and costs both differ per request -----------------------------------------------

# limit=$arg_lim: each request is admitted iff used + max(cost, 1) <= its
# own limit.  On one connection, so one worker's memory of rejections sees
# every request.
for my $one (0, 1) {
    my $key = "vl-$one";
    my ($used, @want, @paths) = (0);
    for (1 .. 70) {
        my $lim = (40, 60, 80, 100)[int rand 4];
        my $cost = rand() < 0.15 ? 0 : 1 + int(rand(20));
        my $fits = $used + ($cost > 0 ? $cost : 1) <= $lim;
        $used += $cost if $fits;
        push @want, "$lim/$cost:" . ($fits ? '200/PASSED' : '429/REJECTED');
        push @paths, "/vl/index.html?lim=$lim&cost=$cost";
    }
    my @r = $one ? exchange($key, @paths) : map { get($_, $key) } @paths;
    my @got = map { my ($l, $c) = $paths[$_] =~ /lim=(\d+)&cost=(\d+)/; "$l/$c:" . st($r[$_] // { status => 0, headers => {} }) } 0 .. $#paths;
    is("@got", "@want", 'limits and costs per request' . ($one ? ', one connection' : '')
        . ': decided as the model says');
    is(redis_t("rl:vl:$key"), $used, "  Redis's t is the units admitted ($used)");
}

# --- cost=0, costs above the limit --------------------------------------------------

{
    my @r = map { get('/c0/index.html', 'z0') } 1 .. 3;
    is(join(' ', map { st($_) } @r), '200/PASSED 200/PASSED 200/PASSED', 'cost=0: admitted while nothing is used');
    is(join(' ', map { hdr($_, 'X-RateLimit-Remaining') // '-' } @r), '100 100 100', 'cost=0: remaining stays 100');
    is($t->redis('EXISTS', 'rl:api:z0'), 0, 'cost=0: no Redis key made');
    is(st(get('/c/index.html?cost=99', 'z0')), '200/PASSED', 'cost 99 admitted');
    my $r = get('/c0/index.html', 'z0');
    is(st($r), '200/PASSED', 'cost=0 admitted while used (99) < limit');
    is(hdr($r, 'X-RateLimit-Remaining'), 1, 'cost=0: remaining 1');
    is(redis_t('rl:api:z0'), 99, 'cost=0: counted nothing (t 99)');
    is(st(get('/c5/index.html', 'z0')), '429/REJECTED', 'cost 5 does not fit in 1');
    is(st(get('/c/index.html?cost=1', 'z0')), '200/PASSED', 'cost 1 fits exactly');
    is(st(get('/c0/index.html', 'z0')), '429/REJECTED', 'cost=0 rejected once used = limit');
    is(st(get('/c/index.html?cost=0', 'z0')), '429/REJECTED', 'cost=$var 0 rejected once used = limit');
    is(redis_t('rl:api:z0'), 100, 'Redis counts 100');

    @r = map { get("/c/index.html?cost=$_", 'over') } 101, 1000, $MAX, 101;
    is(join(' ', map { st($_) } @r), '429/REJECTED 429/REJECTED 429/REJECTED 429/REJECTED',
       "costs above the limit (101, 1000, 2^53) rejected on a fresh subject");
    is($t->redis('EXISTS', 'rl:api:over'), 0, 'costs above the limit: nothing counted');
    is(st(get('/c/index.html?cost=100', 'over')), '200/PASSED', 'then the whole limit in one request');
    is(st(get('/c/index.html?cost=101', 'over2')), '429/REJECTED', 'cost limit+1 rejected');
}

# --- invalid costs from a variable: a bad request (issue 39), one log line ------------
# Not the fail policy, which is for Redis: under `open` it would admit every
# request whose client sends a bad cost.  One connection a request: nginx
# closes a connection after a 400.

{
    is(st(get('/c/index.html?cost=3', 'inv')), '200/PASSED', 'invalid: the subject has 3 units');

    sleep_until_phase(1, 0.05);
    my @r = map { get('/c/index.html?cost=abc', 'inv') } 1 .. 5;
    is(join(' ', map { st($_) } @r), join(' ', ('400/INVALID') x 5), 'cost "abc", fail open: 400, INVALID');
    ok($t->wait_log(cost_line('api', 'abc'), 1), 'cost "abc": an [error] line naming zone and value');
    cmp_ok($t->count_log(cost_line('api', 'abc')), '<=', 2, 'cost "abc": one line a worker for 5 requests');

    @r = map { get('/cc/index.html?cost=abc', 'inv') } 1 .. 3;
    is(join(' ', map { $_->{status} } @r), '400 400 400', 'cost "abc", fail closed: 400 too');

    sleep_until_phase(1, 0.05);
    @r = map { get('/cc/index.html', 'inv') } 1 .. 3;
    is(join(' ', map { $_->{status} } @r), '400 400 400', 'empty cost, fail closed: 400');
    ok($t->wait_log(cost_line('api', ''), 1), 'empty cost: an [error] line naming zone and ""');

    @r = map { get('/c/index.html', 'inv') } 1 .. 3;
    is(join(' ', map { st($_) } @r), '400/INVALID 400/INVALID 400/INVALID', 'empty cost, fail open: 400, INVALID');

    sleep_until_phase(1, 0.05);
    @r = map { get('/c/index.html?cost=9007199254740993', 'inv') } 1 .. 2;
    is(join(' ', map { st($_) } @r), '400/INVALID 400/INVALID', 'cost 2^53+1: 400, INVALID');
    ok($t->wait_log(cost_line('api', '9007199254740993'), 1), 'cost 2^53+1: a line naming it');

    for my $v ('-1', '1.5', '1e3', '0x10', '+5', '5x', '99999999999999999999999') {
        my $o = get("/c/index.html?cost=$v", 'inv');
        my $c = get("/cc/index.html?cost=$v", 'inv');
        is(st($o) . ' ' . $c->{status}, '400/INVALID 400', "cost \"$v\": 400 under fail open and closed");
    }
    is(redis_t('rl:api:inv'), 3, 'invalid costs counted nowhere (t still 3)');
    my @lines = grep { /ratelimit: [^\n]*cost "/ } split /\n/, $t->error_log;
    my @wrong = grep { !/request refused with 400/ } @lines;
    ok(@lines >= 4 && !@wrong, 'the lines say "request refused with 400" ('
       . scalar(@lines) . ' lines)') or diag(join "\n", @wrong);
}

# --- two zones, two costs: all or nothing ----------------------------------------------

{
    my $k = 'ab1';
    my $step = sub {
        my ($ca, $cb, $want, $ta, $tb, $what) = @_;
        my $r = get("/ab/index.html?ca=$ca&cb=$cb", $k);
        is(st($r), $want, "two zones: $what");
        is(redis_t("rl:a:$k") . ' ' . redis_t("rl:b:$k"), "$ta $tb", "  Redis's t: a $ta, b $tb");
        return $r;
    };
    $step->(11, 1, '429/REJECTED', 0, 0, 'a fresh subject, 11 over a\'s 10: rejected');
    is($t->redis('EXISTS', "rl:b:$k"), 0, '  b has no key: the rejection counted in neither');
    my $r = $step->(4, 5, '200/PASSED', 4, 5, 'costs 4 and 5 admitted');
    is(hdr($r, 'X-RateLimit-Remaining'), 6, '  remaining: the tighter zone, a (10 - 4)');
    $step->(7, 1, '429/REJECTED', 4, 5, 'a 4 + 7 > 10: rejected, b not counted');
    $step->(1, 16, '429/REJECTED', 4, 5, 'b 5 + 16 > 20: rejected, a not counted');
    $r = $step->(6, 15, '200/PASSED', 10, 20, 'costs 6 and 15 fill both exactly');
    is(hdr($r, 'X-RateLimit-Remaining'), 0, '  remaining 0');
    $step->(0, 0, '429/REJECTED', 10, 20, 'cost 0 in both, both full: rejected');

    # cost 0 in a full zone rejects, whatever the other zone's cost
    my $k2 = 'ab2';
    get("/ab/index.html?ca=10&cb=0", $k2);
    is(redis_t("rl:a:$k2") . ' ' . $t->redis('EXISTS', "rl:b:$k2"), '10 0', 'a full, b untouched by cost 0');
    is(st(get("/ab/index.html?ca=0&cb=3", $k2)), '429/REJECTED', 'cost 0 in the full zone a rejects');
    is(redis_t("rl:b:$k2"), 0, '  and b counts nothing');

    # a dry-run zone it does not fit in: passes, counted only where it fits
    my $k3 = 'abd';
    $r = get("/abd/index.html?ca=3&cb=25", $k3);
    is(st($r), '200/REJECTED_DRY_RUN', 'dry-run zone b: 25 over its 20 lets the request pass');
    is(redis_t("rl:a:$k3") . ' ' . redis_t("rl:b:$k3"), '3 0', '  counted in a (3), not in b');
    $r = get("/abd/index.html?ca=3&cb=20", $k3);
    is(st($r), '200/PASSED', 'then 20 fits in b');
    is(redis_t("rl:a:$k3") . ' ' . redis_t("rl:b:$k3"), '6 20', '  counted in both');
    $r = get("/abd/index.html?ca=5&cb=1", $k3);
    is(st($r), '429/REJECTED', 'a enforced: 6 + 5 > 10 rejected');
    is(redis_t("rl:a:$k3") . ' ' . redis_t("rl:b:$k3"), '6 20', '  counted in neither');
}

# --- two servers x two workers, one subject, random costs at once ---------------------

{
    $t2->start_nginx;
    my $limit = 500;
    my ($clients, $per) = (8, 30);
    my @cost = map { [ map { rand() < 0.1 ? 0 : 1 + int(rand(30)) } 1 .. $per ] } 1 .. $clients;
    my @ports = ($t->port('PORT'), $t2->port('PORT'));
    my @res = $t->parallel_get(clients => $clients, requests => $clients * $per, requests_for => sub {
        my ($c, $i) = @_;
        return ("/big/index.html?cost=$cost[$c][$i]", { 'X-Api-Key' => 'hammer' }, $ports[($c + $i) % 2]);
    });
    is(scalar @res, $clients * $per, 'hammer: ' . $clients * $per . ' responses');
    my %by;
    $by{ $_->{status} . '/' . ($_->{headers}{'x-rl-status'} // '-') }++ for @res;
    my @odd = grep { $_ ne '200/PASSED' && $_ ne '429/REJECTED' } sort keys %by;
    is("@odd", '', 'hammer: every answer 200 PASSED or 429 REJECTED') or diag(explain \%by);
    my @ok = grep { $_->{status} == 200 && ($_->{headers}{'x-rl-status'} // '') eq 'PASSED' } @res;
    my $sum = 0;
    $sum += $_->{headers}{'x-cost'} for @ok;
    ok($sum <= $limit, "hammer: units admitted ($sum) within the limit ($limit)");
    is(redis_t('rl:big:hammer'), $sum, 'hammer: Redis\'s t is the units admitted');
    is($t->redis_window_total('rl:big:hammer'), $sum, 'hammer: the buckets hold them');
    # Counted one after another: the counts after the admitted requests of
    # cost > 0, in order, grow by exactly their costs; those of cost 0 saw
    # a count under the limit.
    my @paid = sort { $a->[0] <=> $b->[0] }
        map { [ $limit - ($_->{headers}{'x-ratelimit-remaining'} // $limit), $_->{headers}{'x-cost'} ] }
        grep { $_->{headers}{'x-cost'} > 0 } @ok;
    my ($prev, @gaps) = (0);
    for my $p (@paid) {
        push @gaps, "count $p->[0] after cost $p->[1] (previous count $prev)" if $p->[0] - $prev != $p->[1];
        $prev = $p->[0];
    }
    is(scalar @gaps, 0, 'hammer: the admitted requests were counted one after another ('
        . scalar(@paid) . ' of cost > 0)') or diag(join "\n", @gaps[0 .. ($#gaps < 9 ? $#gaps : 9)]);
    is($prev, $sum, 'hammer: the last count is the sum');
    my @free = grep { $_->{headers}{'x-cost'} == 0 } @ok;
    ok(!(grep { ($_->{headers}{'x-ratelimit-remaining'} // 0) < 1 } @free),
       'hammer: cost-0 requests admitted only while under the limit (' . scalar(@free) . ')');
    my $asked = 0;
    $asked += $_->{headers}{'x-cost'} for grep { $_->{status} == 429 } @res;
    my ($adm, $rej) = (0, 0);
    for my $server ($t, $t2) {
        my $m = PromText::scrape($server);
        $adm += PromText::value($m, 'nginx_ratelimit_units_total', zone => 'big', event => 'admitted');
        $rej += PromText::value($m, 'nginx_ratelimit_units_total', zone => 'big', event => 'rejected');
    }
    is("$adm $rej", "$sum $asked", "hammer: metrics of both servers: units admitted ($sum) and asked by the rejected ($asked)");
    for my $server ($t, $t2) {
        my %pids = map { $_->{pid} => 1 } $server->access_entries_for(sub { $_->{uri} =~ m{^/big/} }, 1);
        is(scalar keys %pids, 2, 'hammer: both workers of a server answered');
    }
}

$_->stop_nginx for $t, $t2;
$_->no_alerts for $t, $t2;

done_testing;
