#!/usr/bin/perl
# Bans (issue 43): `ratelimit_zone ... ban=TIME`.  Two nginx servers of two
# workers each and one Redis on the test's clock (the clock shim: t/09),
# once through the window script and once through the Redis module's
# command.
#
# Expected: the request a zone's limit refuses bans its subject in the zone
# for TIME (the side key "rl:ZONE+:SUBJECT" holds b=END, Redis's time in
# ms, and the zone's marker "rl:ZONE+" names it); every later request of
# the subject, on either server, is refused with the zone's status
# (429), $ratelimit_status BANNED, Retry-After and RateLimit t the seconds
# the ban has left, and counts nothing; the request that set it says
# REJECTED with Retry-After TIME, and is the only one logged "banned for
# S s".  A flood of the banned subject costs Redis no call once each
# worker has been refused once (it remembers the ban until its end).  The
# ban ends on time by Redis's clock (its first admission at END, within a
# round trip); with Redis down a worker that remembers the ban refuses
# until its end, then the fail policy (open: passed, ERROR).  DELETE on the
# status location lifts it at once on both servers.  A GCRA zone bans; a
# dry-run zone logs "would ban for S s" and bans nobody; failed logins
# counted by ratelimit_settle (cost=0) ban the user.  The status API's GET
# says "banned_for"; the metrics count bans and banned requests per zone.
# nginx -t refuses ban= with lease= and a ban out of bounds, at its line.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use HTTP::Tiny;
use JSON::PP qw(decode_json);
use Time::HiRes qw(sleep time);
use RateLimitTest qw(hdr parse_ratelimit);
use PromText;
use TokenBackend;

RateLimitTest::require_module();
RateLimitTest::redis_module_so() or BAIL_OUT('redis module not built');

my $t  = RateLimitTest->new(workers => 2);
my $t2 = RateLimitTest->new(workers => 2, clock => $t);
my @SERVERS = ($t, $t2);
my $REDIS_PORT = $t->redis_port;
my $BACKEND = $t->port('BACKEND');
TokenBackend::start($t, $BACKEND);

# --- nginx -t ----------------------------------------------------------------

for my $bad (['limit=5 window=1m ban=1h lease=1m', qr/"ban=" cannot go with "lease=": a lease admits requests without asking Redis/],
             ['limit=5 window=1m ban=500ms', qr/invalid ban "500ms": whole seconds from 1s to 365d/],
             ['limit=5 window=1m ban=366d', qr/invalid ban "366d"/]) {
    my ($params, $re) = @$bad;
    $t->write_conf(<<"EOF");
ratelimit_redis 127.0.0.1:$REDIS_PORT;
ratelimit_zone z key=\$http_x_api_key $params;
server { listen 127.0.0.1:%%PORT%%; location / { ratelimit zone=z; } }
EOF
    my ($rc, $out) = $t->nginx_t;
    my $line = $t->conf_line(qr/ratelimit_zone z /);
    ok($rc != 0 && $out =~ $re && $out =~ /nginx\.conf:$line\b/,
       "nginx -t refuses $params with file and line") or diag($out);
}

my $conf = <<"EOF" . <<'EOF';
ratelimit_redis 127.0.0.1:$REDIS_PORT timeout=2s;
upstream tokens { server 127.0.0.1:$BACKEND; }
EOF
ratelimit_zone b key=$http_x_api_key limit=2 window=60s ban=1h;
ratelimit_zone g key=$http_x_api_key rate=1r/m algorithm=gcra ban=15m;
ratelimit_zone d key=$http_x_api_key limit=2 window=60s ban=1h;
ratelimit_zone login key=$http_x_user limit=5 window=15m ban=1h;
map $http_x_plan $plan { default 2; blocked 0; }
ratelimit_zone v key=$http_x_api_key limit=$plan window=60s ban=1h;
map $status $failed_login { 401 1; default 0; }
server {
    listen 127.0.0.1:%%PORT%% reuseport;
    add_header X-RL-Status "$ratelimit_status" always;
    location /b/ { ratelimit zone=b; alias %%TMP%%/html/; }
    location /g/ { ratelimit zone=g; alias %%TMP%%/html/; }
    location /v/ { ratelimit zone=v; alias %%TMP%%/html/; }
    location /d/ { ratelimit zone=d dry_run; alias %%TMP%%/html/; }
    location /login/ {
        ratelimit zone=login cost=0;
        ratelimit_settle zone=login $failed_login;
        proxy_pass http://tokens;
    }
    location = /q { ratelimit_query zone=b zone=g zone=d zone=login delete=on; }
    location = /metrics { ratelimit_metrics; }
}
EOF
$t->write_conf($conf);
$t2->write_conf($conf);

sub ask {
    my ($srv, $loc, $key) = @_;
    return $srv->get("/$loc/index.html", { 'X-Api-Key' => $key });
}

sub st { my $r = shift; $r->{status} . '/' . (hdr($r, 'X-RL-Status') // '-') }

# Statuses of the requests of $key in $loc on the servers given in turn.
sub sts {
    my ($loc, $key, @srv) = @_;
    return join ' ', map { st(ask($_, $loc, $key)) } @srv;
}

sub del {
    my ($srv, $path) = @_;
    return HTTP::Tiny->new(timeout => 5)->request('DELETE', $srv->url($path));
}

# The ban's end in the side key of $key in $zone, Redis ms; undef if none.
sub ban_end {
    my ($zone, $key) = @_;
    my $v = $t->redis('GET', "rl:$zone+:$key") // '';
    return $v =~ /(?:^|;)b=(\d+)/ ? $1 : undef;
}

# Redis's calls deciding requests since the last CONFIG RESETSTAT.
sub decide_calls {
    my $stats = $t->redis('INFO', 'commandstats');
    my $n = 0;
    $n += $1 while $stats =~ /cmdstat_(?:evalsha|eval|ratelimit\.decide):calls=(\d+)/g;
    return $n;
}

sub metric_sum { my @a = @_; my $s = 0; $s += PromText::value(PromText::scrape($_), @a) for @SERVERS; $s }

# Requests of $key in zone b, to either server, 10 ms apart, until one is
# admitted or Redis's clock is a second past $end: each's start and end
# on that clock (the test's), status and whether it was admitted.
sub poll_until_passed {
    my ($key, $end) = @_;
    my @polls;
    until ((@polls && $polls[-1]{passed}) || $t->clock_now > $end + 1) {
        my $from = $t->clock_now;
        my $s = st(ask($SERVERS[int(rand 2)], 'b', $key));
        push @polls, { from => $from, to => $t->clock_now, status => $s, passed => ($s =~ /^200/ ? 1 : 0) };
        sleep 0.01;
    }
    return @polls;
}

# Both servers restarted, each worker subscribed to the forgive channel (a
# new subscription forgets what the worker remembers).
sub restart_nginx {
    for (@SERVERS) { $_->stop_nginx; $_->start_nginx }
    RateLimitTest::wait_until(sub {
        my $n = $t->redis('PUBSUB', 'NUMSUB', 'rl:wake:forgive');
        ref $n && $n->[1] == 4 }, 5)
        or die "the workers did not subscribe\n";
}

for my $implementation ('script', 'command') {
    my $module = $implementation eq 'command';
    $t->start_redis(redis_module => $module, clock => 1);
    restart_nginx();
    my %logged = map { $_ => $SERVERS[$_]->count_log(qr/banned for 3600 s/) } 0, 1;

    # --- set on one server, in force on the other -----------------------
    is(sts('b', 'a', $t, $t2), '200/PASSED 200/PASSED', "$implementation: the limit's 2 pass");
    my $r = ask($t, 'b', 'a');
    is(st($r), '429/REJECTED', "$implementation: the 3rd is refused by the limit, and bans");
    is(hdr($r, 'Retry-After'), 3600, "$implementation: its Retry-After is the ban's 3600 s");
    my $end = ban_end('b', 'a');
    ok(defined $end && abs($end - $t->redis_time_ms - 3_600_000) < 2000,
       "$implementation: the side key holds b=END, an hour on Redis's clock");
    ok($t->redis('ZSCORE', 'rl:b+', 'rl:b+:a'), "$implementation: the zone's marker names it");
    $r = ask($t2, 'b', 'a');
    is(st($r), '429/BANNED', "$implementation: the next request, on the other server, is BANNED");
    my $after = hdr($r, 'Retry-After') // 0;
    ok($after > 3590 && $after <= 3600, "$implementation: Retry-After $after, the ban's time left");
    my ($rl) = parse_ratelimit(hdr($r, 'RateLimit') // '');
    is($rl->{t}, $after, "$implementation: RateLimit t says so too");
    is($rl->{r}, 0, "$implementation: and nothing remaining");
    my $reset = hdr($r, 'X-RateLimit-Reset') // 0;
    ok(abs($reset - ($t->redis_time_ms / 1000 + $after)) <= 2,
       "$implementation: X-RateLimit-Reset $reset is the ban's end");
    is($t->redis_window_count('rl:b:a'), 2, "$implementation: the refused requests counted nothing");

    # --- a flood costs Redis one call per worker at most -----------------
    $t->redis('CONFIG', 'RESETSTAT');
    my %seen;
    $seen{ st(ask($SERVERS[$_ % 2], 'b', 'a')) }++ for 1 .. 100;
    is(join(',', map { "$_=$seen{$_}" } sort keys %seen), '429/BANNED=100',
       "$implementation: a flood of 100 is BANNED");
    my $calls = decide_calls();
    ok($calls <= 3, "$implementation: and cost Redis $calls calls (one per worker not yet refused, 3 at most)");
    is($t->redis_window_count('rl:b:a'), 2, "$implementation: counts during the ban do not grow");
    is($t->count_log(qr/banned for 3600 s/) + $t2->count_log(qr/banned for 3600 s/)
       - $logged{0} - $logged{1}, 1,
       "$implementation: \"banned for 3600 s\" logged once, at the ban");

    # --- status API and metrics -------------------------------------------
    $r = $t2->get('/q?zone=b&key=a');
    like($r->{content}, qr/"remaining":0,.*"banned_for":(\d+)/, "$implementation: GET says banned_for");
    my ($for) = $r->{content} =~ /"banned_for":(\d+)/;
    ok(defined $for && $for > 3500 && $for <= 3600, "$implementation: banned_for " . ($for // '-') . " s");
    is(metric_sum('nginx_ratelimit_bans_total', zone => 'b'), 1, "$implementation: bans_total 1");
    is(metric_sum('nginx_ratelimit_banned_requests_total', zone => 'b'), 101,
       "$implementation: banned_requests_total 101");
    my ($bans, $banned) = (0, 0);
    for (@SERVERS) {
        my $b = decode_json($_->get('/metrics?format=json')->{content})->{limit_reqs}{b};
        $bans += $b->{bans} // 0;
        $banned += $b->{banned_requests} // 0;
    }
    is("$bans/$banned", '1/101', "$implementation: the JSON metrics say so too");

    # --- forgive lifts the ban everywhere ---------------------------------
    is(del($t2, '/q?zone=b&key=a')->{status}, 204, "$implementation: DELETE answers 204");
    is(ban_end('b', 'a'), undef, "$implementation: the ban's part is gone from Redis");
    is(sts('b', 'a', $t, $t2), '200/PASSED 200/PASSED', "$implementation: a forgiven subject passes at once on both servers");

    # --- GCRA --------------------------------------------------------------
    is(sts('g', 'g1', $t), '200/PASSED', "$implementation: GCRA: a turn");
    $r = ask($t2, 'g', 'g1');
    is(st($r), '429/REJECTED', "$implementation: GCRA: the next too early is refused, and bans");
    is(hdr($r, 'Retry-After'), 900, "$implementation: GCRA: for the ban's 900 s");
    ok(defined ban_end('g', 'g1'), "$implementation: GCRA: b=END in its side key");
    is(sts('g', 'g1', $t), '429/BANNED', "$implementation: GCRA: banned on the other server");

    # --- a blocked plan (limit 0) is refused here, and bans nobody ----------
    $r = $t->get('/v/index.html', { 'X-Api-Key' => 'p', 'X-Plan' => 'blocked' });
    is(st($r), '429/REJECTED', "$implementation: a map's 0 refuses");
    is($t->redis('EXISTS', 'rl:v+:p'), 0, "$implementation: and bans nobody");
    is(sts('v', 'p', $t2, $t), '200/PASSED 200/PASSED', "$implementation: the plan unblocked, it passes");

    # --- dry run ------------------------------------------------------------
    is(sts('d', 'x', $t, $t, $t2, $t2), '200/PASSED 200/PASSED 200/REJECTED_DRY_RUN 200/REJECTED_DRY_RUN',
       "$implementation: dry run: refused in dry run only");
    ok($t2->count_log(qr/dry run, by zone "d", key "x", would ban for 3600 s/) >= 1,
       "$implementation: dry run: logs \"would ban for 3600 s\"");
    is($t->redis('EXISTS', 'rl:d+:x'), 0, "$implementation: dry run: bans nobody");

    # --- failed logins counted by settles ban the user ----------------------
    my $login = sub {
        my ($srv, $user, $status) = @_;
        st($srv->get("/login/?status=$status&mode=none", { 'X-User' => $user }));
    };
    is(join(' ', map { $login->($SERVERS[$_ % 2], 'mallory', 401) } 1 .. 5),
       join(' ', ('401/PASSED') x 5), "$implementation: logins: five failures");
    ok(RateLimitTest::wait_until(sub { ($t->redis_window_count('rl:login:mallory') // 0) == 5 }, 3),
       "$implementation: logins: Redis counts them");
    is($login->($t, 'mallory', 200), '429/REJECTED', "$implementation: logins: the 6th attempt bans");
    is($login->($t2, 'mallory', 200), '429/BANNED', "$implementation: logins: banned on the other server");
    ok(defined ban_end('login', 'mallory'), "$implementation: logins: for an hour");

    # --- the ban ends on time, by Redis's clock -----------------------------
    is(sts('b', 'e', $t, $t, $t), '200/PASSED 200/PASSED 429/REJECTED', "$implementation: e is banned");
    $end = ban_end('b', 'e') / 1000;
    restart_nginx();    # the workers' memory of the ban is real time
    $t->set_clock($end - 0.6);
    is(sts('b', 'e', $t, $t2), '429/BANNED 429/BANNED', "$implementation: 0.6 s before its end, banned");
    # Polled until admitted: each poll's start and end by the clock.  The
    # ban ended on time if the first admission ended after END and the
    # poll before it started before END: admitted by the first poll after
    # the end, whatever a round trip takes.
    my @polls = poll_until_passed('e', $end);
    my ($before, $first) = @polls[-2, -1];
    ok($first->{passed} && $first->{to} >= $end - 0.005 && $before->{from} < $end + 0.005,
       sprintf("$implementation: admitted by the first request after the ban's end "
               . "(the last refused one sent %.3f s from it, the first admitted answered %.3f s from it)",
               $before->{from} - $end, $first->{to} - $end));

    # --- Redis down during a ban: remembered till its end, then fail open ---
    is(sts('b', 'f', $t, $t, $t), '200/PASSED 200/PASSED 429/REJECTED', "$implementation: f is banned");
    $end = ban_end('b', 'f') / 1000;
    restart_nginx();
    $t->set_clock($end - 0.8);
    %seen = ();
    $seen{ st(ask($SERVERS[$_ % 2], 'b', 'f')) }++ for 1 .. 40;
    is(join(',', map { "$_=$seen{$_}" } sort keys %seen), '429/BANNED=40',
       "$implementation: every worker refused f once");
    $t->stop_redis;
    # A worker remembers the ban until the end Redis told it, measured
    # from when its call left: it may end early by that call's round trip.
    @polls = poll_until_passed('f', $end);
    my @refused = grep { $_->{status} eq '429/BANNED' } @polls;
    ($before, $first) = @polls[-2, -1];
    ok(@refused > 5 && @refused == @polls - 1,
       "$implementation: Redis down: the workers keep refusing (" . scalar(@refused) . ' BANNED)');
    ok($first->{status} eq '200/ERROR' && $first->{from} >= $end - 0.1 && $before->{from} < $end + 0.005,
       sprintf("$implementation: until the ban's end (the first passed sent %.3f s from it), "
               . "then the fail policy (%s)", $first->{from} - $end, $first->{status}));

    $_->stop_nginx for @SERVERS;
    $_->no_alerts for @SERVERS;
    $t->stop_redis;
    $t->set_clock(time);
}

done_testing;
