#!/usr/bin/perl
# Limits from a variable: `limit=$var` and `rate=$var`, evaluated for each
# request, on two nginx servers of two workers each sharing one Redis.
#
# Expected (docs/directives.md ratelimit_zone, docs/recipes.md "Plans per API key"):
# - each tier of a `map` on the API key is limited exactly to its own limit,
#   across both servers, and RateLimit-Policy, X-RateLimit-Limit and
#   $ratelimit_limit show the limit that applied;
# - rate=$var takes Nr/UNIT, as many requests as it admits in the zone's
#   window (window=1m: 1r/s is 60);
# - requests of one subject under different limits, in the same batches,
#   are each decided under their own limit, one after another;
# - a subject whose tier changes (the map edited, nginx reloaded) keeps its
#   count: the key holds no limit;
# - a value that is no limit gets ratelimit_fail (open: passed, ERROR;
#   closed: 503), is counted nowhere, and is logged once a second per
#   worker, naming the zone and the value, escaped;
# - an empty value: the zone does not limit the request;
# - the memory of rejections answers a subject rejected at limit L for
#   requests under L or less only: one whose limit rose asks Redis;
# - the status API and the peek header evaluate the variable in their own
#   request, and leave a zone out where it is empty; the metrics' zone
#   limit is the one the zone applied last.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP ();
use Time::HiRes qw(time sleep);
use RateLimitTest qw(parse_policy hdr sleep_until_phase);

RateLimitTest::require_module();

my $JSON = JSON::PP->new->utf8;
my $t  = RateLimitTest->new(workers => 2);
my $t2 = RateLimitTest->new(workers => 2);
$t->start_redis;
my $REDIS_PORT = $t->redis_port;

# The configuration of both servers; `moved-` keys are on the plan given.
sub conf {
    my (%o) = @_;
    my $moved = $o{moved} // 5;
    return <<"EOF" . <<'EOF';
ratelimit_redis 127.0.0.1:$REDIS_PORT timeout=2s;
map \$http_x_api_key \$plan_limit {
    default     "";
    ~^free-     5;
    ~^pro-      20;
    ~^ent-      50;
    ~^moved-    $moved;
    ~^bad-      "5 per minute";
    ~^zero-     0;
}
EOF
map $http_x_api_key $plan_rate {
    default     "";
    ~^free-     5r/m;
    ~^pro-      1r/s;
    ~^ent-      3600r/h;
    ~^bad-      10r/x;
    ~^tiny-     1r/h;
}
map $http_x_plan $user_limit {
    default     "";
    free        10;
    pro         30;
}
ratelimit_zone plans key=$http_x_api_key limit=$plan_limit window=60s;
ratelimit_zone rates key=$http_x_api_key rate=$plan_rate window=1m;
ratelimit_zone users key=$http_x_user limit=$user_limit window=60s;
ratelimit_zone hdr   key=$http_x_api_key limit=$http_x_limit window=60s;

server {
    listen 127.0.0.1:%%PORT%% reuseport;
    add_header X-RL-Status "$ratelimit_status" always;
    add_header X-RL-Limit "$ratelimit_limit" always;
    location /p/      { ratelimit zone=plans; alias %%TMP%%/html/; }
    location /closed/ { ratelimit zone=plans; ratelimit_fail closed;
                        alias %%TMP%%/html/; }
    location /r/      { ratelimit zone=rates; alias %%TMP%%/html/; }
    location /u/      { ratelimit zone=users; alias %%TMP%%/html/; }
    location /h/      { ratelimit zone=hdr; alias %%TMP%%/html/; }
    location /peek/   { ratelimit zone=plans; ratelimit zone=rates;
                        ratelimit_peek_header X-Peek; alias %%TMP%%/html/; }
    location = /ratelimit { ratelimit_query zone=plans zone=rates; }
    location = /metrics   { ratelimit_metrics; }
}
EOF
}

sub start_both {
    my (%o) = @_;
    $_->write_conf(conf(%o)) for $t, $t2;
    $_->start_nginx for $t, $t2;
}

start_both();
my @PORTS = ($t->port('PORT'), $t2->port('PORT'));

sub get {
    my ($path, %h) = @_;
    my $server = delete $h{server} // $t;
    return $server->get($path, \%h);
}

# Requests over one connection (one worker), each "GET PATH" with headers.
sub exchange {
    my ($path, @headers) = @_;
    return $t->raw_exchange(map {
        my $h = $_;
        "GET $path HTTP/1.1\r\nHost: localhost\r\n"
            . join('', map { "$_: $h->{$_}\r\n" } sort keys %$h) . "\r\n"
    } @headers);
}

sub metrics_json {
    my ($server) = @_;
    my $r = $server->get('/metrics?format=json');
    return eval { $JSON->decode($r->{content}) } // {};
}

# --- three tiers, each exactly its own limit, across two servers ------------

{
    my %limit = (free => 5, pro => 20, ent => 50);
    my @tiers = sort keys %limit;
    # 80 requests a tier, interleaved, from 12 clients over both servers.
    my @res = $t->parallel_get(clients => 12, requests => 240, requests_for => sub {
        my ($c, $i) = @_;
        my $tier = $tiers[($c + $i) % 3];
        return ('/p/index.html', { 'X-Api-Key' => "$tier-1" },
                $PORTS[($c + $i) % 2]);
    });
    is(scalar @res, 240, 'tiers: 240 responses');
    # The client's headers are not echoed: tell the tier by the limit shown.
    for my $tier (@tiers) {
        my $l = $limit{$tier};
        my @mine = grep { (hdr($_, 'x-ratelimit-limit') // '') eq $l } @res;
        is(scalar @mine, 80, "tier $tier: 80 responses show limit $l");
        my $ok = grep { $_->{status} == 200 } @mine;
        my $rej = grep { $_->{status} == 429 } @mine;
        is($ok, $l, "tier $tier: exactly $l admitted");
        is($rej, 80 - $l, "tier $tier: the rest rejected");
        is($t->redis_window_total("rl:plans:$tier-1"), $l, "tier $tier: Redis counts $l");
        my @bad = grep {
            (hdr($_, 'ratelimit-policy') // '') ne qq{"plans";q=$l;w=60}
                || (hdr($_, 'x-rl-limit') // '') ne $l
        } @mine;
        is(scalar @bad, 0, "tier $tier: RateLimit-Policy q=$l and \$ratelimit_limit $l on every response")
            or diag(explain [map { $_->{headers} } @bad[0 .. 0]]);
        my @rem = sort { $a <=> $b } map { hdr($_, 'x-ratelimit-remaining') } grep { $_->{status} == 200 } @mine;
        is("@rem", join(' ', 0 .. $l - 1), "tier $tier: admitted requests saw remaining " . ($l - 1) . "..0 once each");
    }
    my %rs;
    $rs{ hdr($_, 'x-rl-status') // '' }++ for @res;
    ok(!$rs{ERROR}, 'tiers: no ERROR') or diag(explain \%rs);

    my @e = $t->access_entries_for(sub { $_->{uri} eq '/p/index.html' && $_->{status} == 200 }, 1);
    my %lims = map { $_->{lim} => 1 } @e;
    is(join(',', sort { $a <=> $b } keys %lims), '5,20,50', 'access log: $ratelimit_limit is each tier\'s limit');
}

# --- one subject under two limits in the same batches --------------------------

{
    # 80 requests of user "mixed", half on plan free (10), half on plan pro
    # (30), from 8 clients over both servers at once.
    my @res = $t->parallel_get(clients => 8, requests => 80, requests_for => sub {
        my ($c, $i) = @_;
        return ('/u/index.html', { 'X-User' => 'mixed', 'X-Plan' => ($i % 2 ? 'pro' : 'free') },
                $PORTS[$c % 2]);
    });
    my @ok = grep { $_->{status} == 200 } @res;
    is(scalar @res, 80, 'one subject, two limits: 80 responses');
    is(scalar @ok, 30, 'one subject, two limits: 30 admitted, the higher limit');
    is($t->redis_window_total('rl:users:mixed'), 30, 'one subject, two limits: Redis counts 30');
    # Each admitted request was counted after the ones before it: the count
    # after it (its limit minus what remained) is 1..30, once each, and no
    # higher than its own limit.
    my @after = sort { $a <=> $b } map { hdr($_, 'x-ratelimit-limit') - hdr($_, 'x-ratelimit-remaining') } @ok;
    is("@after", join(' ', 1 .. 30), 'one subject, two limits: counts after the admitted requests are 1..30');
    my @free_ok = grep { hdr($_, 'x-ratelimit-limit') == 10 } @ok;
    ok(@free_ok <= 10, 'one subject, two limits: at most 10 admitted under limit 10 (' . @free_ok . ')');
    ok(!(grep { hdr($_, 'x-ratelimit-limit') == 10
                && hdr($_, 'x-ratelimit-limit') - hdr($_, 'x-ratelimit-remaining') > 10 } @ok),
       'one subject, two limits: none admitted under 10 past a count of 10');
    my %lim = map { hdr($_, 'x-ratelimit-limit') => 1 } @res;
    is(join(',', sort { $a <=> $b } keys %lim), '10,30', 'one subject, two limits: both limits shown');
}

# --- the memory of rejections, when a subject's limit rises -------------------

{
    my $hits = sub { metrics_json($t)->{limit_reqs}{users}{deny_cache_hits} // 0 };
    my $before = $hits->();
    my $free = { 'X-User' => 'dc', 'X-Plan' => 'free' };
    my $pro  = { 'X-User' => 'dc', 'X-Plan' => 'pro' };
    # One connection: the worker that remembers the rejection answers all.
    my @r = exchange('/u/index.html', ($free) x 12, $pro, ($pro) x 19, $pro, $free, $pro);
    is(scalar @r, 35, 'memory: 35 responses on one connection');
    is(join(' ', map { $_->{status} } @r[0 .. 11]), join(' ', ('200') x 10, '429', '429'),
       'memory: plan free, 10 admitted, then rejected');
    is($r[12]{status}, 200, 'memory: the plan rose to pro: admitted, not rejected from memory');
    is($r[12]{headers}{'x-ratelimit-remaining'}, 19, 'memory: under pro, the count of 11 kept (remaining 19)');
    is(join(' ', map { $_->{status} } @r[13 .. 31]), join(' ', ('200') x 19), 'memory: pro admitted up to 30');
    is(join(' ', map { $_->{status} } @r[32 .. 34]), '429 429 429', 'memory: then pro and free rejected');
    is($r[33]{headers}{'x-ratelimit-limit'}, 10, 'memory: the free request rejected under its own limit, 10');
    is($t->redis_window_total('rl:users:dc'), 30, 'memory: Redis counts 30');
    # The free request after the first rejection (12th), and the free and
    # pro ones after the rejection at 30, from memory; the first pro one
    # went to Redis.
    is($hits->() - $before, 3, 'memory: 3 rejections answered from memory, none of them the raised limit');
}

# --- rate=$var: a rate in the zone's window -------------------------------------

{
    my $r = get('/r/index.html', 'X-Api-Key' => 'pro-r');
    is($r->{status}, 200, 'rate: 1r/s admitted');
    is(hdr($r, 'RateLimit-Policy'), '"rates";q=60;w=60', 'rate: 1r/s in a window of 1m is 60');
    is(hdr($r, 'X-RateLimit-Remaining'), 59, 'rate: remaining 59');
    is(hdr(get('/r/index.html', 'X-Api-Key' => 'ent-r'), 'RateLimit-Policy'), '"rates";q=60;w=60',
       'rate: 3600r/h in a window of 1m is 60');
    my @s = map { get('/r/index.html', 'X-Api-Key' => 'free-r', server => $_ % 2 ? $t2 : $t)->{status} } 1 .. 7;
    is("@s", '200 200 200 200 200 429 429', 'rate: 5r/m admits 5 in the minute, on either server');
}

# --- a value that is no limit: a bad request (issue 39), one log line --------
# Not the fail policy, which is for Redis: `open` would admit everything.

{
    my $line = qr/\[error\].*ratelimit: invalid limit "5 per minute" for zone "plans", request refused with 400/;
    sleep_until_phase(1, 0.05);
    # One connection each: nginx closes a connection after a 400.
    my @r = map { get('/p/index.html', 'X-Api-Key' => 'bad-1') } 1 .. 5;
    is(join(' ', map { $_->{status} } @r), '400 400 400 400 400', 'invalid: refused with 400 under fail open');
    is(join(' ', map { $_->{headers}{'x-rl-status'} // '' } @r), 'INVALID INVALID INVALID INVALID INVALID',
       'invalid: $ratelimit_status INVALID');
    ok(!(grep { defined $_->{headers}{'ratelimit-policy'} || defined $_->{headers}{'x-ratelimit-limit'}
                || ($_->{headers}{'x-rl-limit'} // '') ne '' } @r),
       'invalid: no rate limit headers, $ratelimit_limit empty');
    # Each worker logs one line a second at most: the 5 requests went to
    # the server's 2 workers.
    my @served = ($t->access_entries_for(sub { $_->{uri} eq '/p/index.html' && $_->{status} == 400 }, 5))[-5 .. -1];
    my $workers = () = do { my %p = map { $_->{pid} => 1 } @served; keys %p };
    ok($t->wait_log($line, $workers), "invalid: one log line for 5 requests within a second on each worker ($workers)");
    sleep 0.3;
    is($t->count_log($line), $workers, 'invalid: still one a worker');

    sleep_until_phase(1, 0.05);
    @r = map { get('/closed/index.html', 'X-Api-Key' => 'bad-1') } 1 .. 3;
    is(join(' ', map { $_->{status} } @r), '400 400 400', 'invalid: refused with 400 under fail closed too');
    ok($t->wait_log($line, $workers + 1), 'invalid, closed: logged too');
    cmp_ok($t->count_log($line), '<=', $workers + 2, 'invalid, closed: one line a worker at most');
    is($t->redis('EXISTS', 'rl:plans:bad-1'), 0, 'invalid: nothing counted');

    # A limit of 0 admits none: rejected, not invalid; a rate under one
    # request a window is no limit of this zone.
    sleep 1.05;
    my $zero = get('/p/index.html', 'X-Api-Key' => 'zero-1');
    is("$zero->{status} " . ($zero->{headers}{'x-rl-status'} // ''), '429 REJECTED', 'limit 0: rejected');
    is($t->count_log(qr/invalid limit "0"/), 0, 'limit 0: not logged as invalid');
    is($t->redis('EXISTS', 'rl:plans:zero-1'), 0, 'limit 0: nothing counted');
    sleep 1.05;
    is(get('/r/index.html', 'X-Api-Key' => 'tiny-1')->{headers}{'x-rl-status'}, 'INVALID',
       'invalid: 1r/h is under one request in a minute');
    is($t->wait_log(qr/invalid rate "1r\/h" for zone "rates", request refused with 400/, 1), 1, 'invalid: rate "1r/h" logged');
    sleep 1.05;
    get('/r/index.html', 'X-Api-Key' => 'bad-1');
    is($t->wait_log(qr/invalid rate "10r\/x" for zone "rates"/, 1), 1, 'invalid: rate "10r/x" logged');

    # A client's bytes in the value are escaped in the log.
    sleep 1.05;
    @r = exchange('/h/index.html', { 'X-Api-Key' => 'esc', 'X-Limit' => "7\"\\\xff x" });
    is($r[0]{headers}{'x-rl-status'}, 'INVALID', 'invalid: a header\'s value');
    is($t->wait_log(qr/invalid limit "7\\x22\\x5C\\xFF x" for zone "hdr"/i, 1), 1,
       'invalid: the value escaped in the log line')
        or diag(join "\n", grep { /invalid limit/ } split /\n/, $t->error_log);
    @r = exchange('/h/index.html', { 'X-Api-Key' => 'esc', 'X-Limit' => '2' });
    is(hdr($r[0], 'RateLimit-Policy'), '"hdr";q=2;w=60', 'a header\'s valid value is the limit');
}

# --- an empty value: not limited by the zone -------------------------------------

{
    my @r = map { get('/p/index.html', 'X-Api-Key' => 'none-1') } 1 .. 8;
    is(join(' ', map { $_->{status} } @r), join(' ', ('200') x 8), 'empty value: never limited');
    ok(!(grep { defined hdr($_, 'RateLimit') || defined hdr($_, 'RateLimit-Policy')
                || defined hdr($_, 'X-RateLimit-Limit') || (hdr($_, 'X-RL-Status') // '') ne ''
                || (hdr($_, 'X-RL-Limit') // '') ne '' } @r),
       'empty value: no headers, $ratelimit_status and $ratelimit_limit empty');
    is($t->redis('EXISTS', 'rl:plans:none-1'), 0, 'empty value: no Redis key');
    # An empty key is not limited either, its value not even looked at.
    is(get('/p/index.html')->{status}, 200, 'empty key: not limited');
}

# --- a tier change keeps the count -------------------------------------------------

{
    my @s = map { get('/p/index.html', 'X-Api-Key' => 'moved-1', server => $_ % 2 ? $t2 : $t)->{status} } 1 .. 6;
    is("@s", '200 200 200 200 200 429', 'tier change: limit 5 on plan 5');
    # The operator moves the key to another plan.
    for my $server ($t, $t2) {
        $server->write_conf(conf(moved => 20));
        $server->reload;
    }
    my $r = get('/p/index.html', 'X-Api-Key' => 'moved-1');
    is($r->{status}, 200, 'tier change: admitted on plan 20');
    is(hdr($r, 'RateLimit-Policy'), '"plans";q=20;w=60', 'tier change: the new limit shown');
    is(hdr($r, 'X-RateLimit-Remaining'), 14, 'tier change: the count of 5 kept (remaining 14)');
    @s = map { get('/p/index.html', 'X-Api-Key' => 'moved-1', server => $_ % 2 ? $t2 : $t)->{status} } 1 .. 15;
    is("@s", join(' ', ('200') x 14, '429'), 'tier change: 20 in all, across both servers');
    is($t->redis_window_total('rl:plans:moved-1'), 20, 'tier change: Redis counts 20');
}

# --- the status API and the peek header ----------------------------------------------

{
    my $r = get('/ratelimit?key=pro-1', 'X-Api-Key' => 'pro-1');
    my $j = eval { $JSON->decode($r->{content}) } // [];
    is($r->{status}, 200, 'status API: 200');
    is(scalar @$j, 2, 'status API: both zones, the query carrying what the maps read');
    is("$j->[0]{zone} $j->[0]{limit} $j->[0]{used} $j->[0]{remaining}", 'plans 20 20 0',
       'status API: plans, limit 20 of tier pro, used 20');
    is("$j->[1]{zone} $j->[1]{limit} $j->[1]{used}", 'rates 60 0', 'status API: rates, limit 60 (1r/s a minute)');

    $r = get('/ratelimit?key=pro-1');
    is($r->{content}, '[]', 'status API: without the header, the maps give nothing: zones left out');
    $r = get('/ratelimit?key=free-1', 'X-Api-Key' => 'ent-1');
    $j = eval { $JSON->decode($r->{content}) } // [];
    is($j->[0]{limit}, 50, 'status API: the variable is the query\'s own');

    $r = get('/peek/index.html', 'X-Api-Key' => 'free-1', 'X-Peek' => '1');
    $j = eval { $JSON->decode($r->{content}) } // [];
    is(join(' ', map { "$_->{zone}:$_->{limit}:$_->{used}" } @$j), 'plans:5:5 rates:5:0',
       'peek: the request\'s own limits');
    $r = get('/peek/index.html', 'X-Api-Key' => 'bad-2', 'X-Peek' => '1');
    is($r->{content}, '[]', 'peek: zones whose values are no limit left out');
}

# --- metrics: the limit each zone applied last ----------------------------------

{
    get('/p/index.html', 'X-Api-Key' => 'ent-1');
    my $m = metrics_json($t);
    is($m->{limit_reqs}{plans}{limit}, 50, 'metrics: plans applied 50 last');
    get('/p/index.html', 'X-Api-Key' => 'free-1');
    is(metrics_json($t)->{limit_reqs}{plans}{limit}, 5, 'metrics: then 5');
    my $text = $t->get('/metrics')->{content};
    like($text, qr/^nginx_ratelimit_zone_limit\{zone="plans"\} 5$/m, 'metrics: Prometheus zone_limit 5');
    like($text, qr/^nginx_ratelimit_zone_limit\{zone="rates"\} \d+$/m, 'metrics: rates has a limit');
    is(metrics_json($t2)->{limit_reqs}{hdr}{limit}, 0, 'metrics: a zone no request applied yet shows 0');
}

$_->stop_nginx for $t, $t2;
$_->no_alerts for $t, $t2;

done_testing;
