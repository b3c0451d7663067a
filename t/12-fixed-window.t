#!/usr/bin/perl
# Fixed windows (algorithm=fixed): configuration, exact limit (also with two
# workers and parallel clients), headers, reset exactly at the window
# boundary (windows aligned to Redis time), the boundary burst, Retry-After.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use POSIX qw(ceil);
use JSON::PP ();
use RateLimitTest qw(parse_ratelimit parse_policy hdr);

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 2);

# --- configuration ------------------------------------------------------------

my $SERVER = <<'EOF';
server {
    listen 127.0.0.1:%%PORT%%;
    location / { ratelimit zone=z; root %%TMP%%/html; }
}
EOF

sub conf_t {
    my ($zone) = @_;
    $t->write_conf("ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=1s;\n$zone\n$SERVER");
    return $t->nginx_t;
}

{
    my ($st, $out) = conf_t('ratelimit_zone z key=$http_x_api_key limit=5 window=10s algorithm=fixed;');
    is($st, 0, 'valid: limit/window algorithm=fixed') or diag($out);
    ($st, $out) = conf_t('ratelimit_zone z key=$http_x_api_key rate=10r/m algorithm=fixed;');
    is($st, 0, 'valid: rate algorithm=fixed') or diag($out);
    ($st, $out) = conf_t('ratelimit_zone z key=$http_x_api_key limit=5 window=10s algorithm=sliding;');
    is($st, 0, 'valid: algorithm=sliding') or diag($out);
    ($st, $out) = conf_t('ratelimit_zone z key=$http_x_api_key limit=5 window=10s bucket=1s algorithm=sliding;');
    is($st, 0, 'valid: bucket with algorithm=sliding') or diag($out);

    ($st, $out) = conf_t('ratelimit_zone z key=$http_x_api_key limit=5 window=10s bucket=1s algorithm=fixed;');
    isnt($st, 0, 'invalid: bucket= with algorithm=fixed: nginx -t fails');
    like($out, qr/applies to sliding windows only/, 'invalid: bucket= with algorithm=fixed: message') or diag($out);
    like($out, qr/\[emerg\]/, 'invalid: bucket= with algorithm=fixed: [emerg]') or diag($out);

    ($st, $out) = conf_t('ratelimit_zone z key=$http_x_api_key limit=5 window=10s algorithm=bogus;');
    isnt($st, 0, 'invalid: algorithm=bogus: nginx -t fails');
    like($out, qr/invalid algorithm/, 'invalid: algorithm=bogus: message') or diag($out);
    like($out, qr/bogus/, 'invalid: algorithm=bogus: names the value') or diag($out);
}

# --- running server -------------------------------------------------------------

$t->start_redis;
$t->write_conf(<<'EOF');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=1s;
ratelimit_zone fx  key=$http_x_api_key limit=2 window=5s algorithm=fixed;
ratelimit_zone fe  key=$http_x_api_key limit=5 window=60s algorithm=fixed;
ratelimit_zone fr  key=$http_x_api_key rate=2r/s algorithm=fixed;
ratelimit_zone fb  key=$http_x_api_key limit=3 window=2s algorithm=fixed;
ratelimit_zone sb  key=$http_x_api_key limit=3 window=2s;
ratelimit_zone fc  key=$http_x_api_key limit=20 window=1h algorithm=fixed;

server {
    listen 127.0.0.1:%%PORT%% reuseport;
    add_header X-RL-Status "$ratelimit_status" always;

    location /fx/ { ratelimit zone=fx; alias %%TMP%%/html/; }
    location /fe/ { ratelimit zone=fe; alias %%TMP%%/html/; }
    location /fr/ { ratelimit zone=fr; alias %%TMP%%/html/; }
    location /fb/ { ratelimit zone=fb; alias %%TMP%%/html/; }
    location /sb/ { ratelimit zone=sb; alias %%TMP%%/html/; }
    location /fc/ { ratelimit zone=fc; alias %%TMP%%/html/; }

    location = /q/fx { ratelimit_query zone=fx; }
    location = /q/fe { ratelimit_query zone=fe; }
}
EOF
$t->start_nginx;

sub query {
    my ($loc, $key) = @_;
    my $r = $t->get("/q/$loc?key=$key");
    my $j = eval { JSON::PP->new->utf8->decode($r->{content}) };
    return ($r, $j);
}

# Sleep until Redis time >= $target_ms; returns Redis time then.
sub wait_until_ms {
    my ($target) = @_;
    while (1) {
        my $now = $t->redis_time_ms;
        return $now if $now >= $target;
        sleep(($target - $now) / 1000 + 0.001);
    }
}

# Sleep until the Redis time is $phase ms into a $period ms window (the next
# such moment); returns Redis time then.
sub wait_phase {
    my ($period, $phase) = @_;
    my $now = $t->redis_time_ms;
    my $target = int($now / $period) * $period + $phase;
    $target += $period if $target <= $now;
    return wait_until_ms($target);
}

# Make sure at least $need ms are left in the current $period ms window
# (else wait until just after its end); returns Redis time then.
sub ensure_room {
    my ($period, $need) = @_;
    my $now = $t->redis_time_ms;
    my $end = (int($now / $period) + 1) * $period;
    return $now if $end - $now >= $need;
    return wait_until_ms($end + 20);
}

sub window_end { my ($ms, $period) = @_; return (int($ms / $period) + 1) * $period }

# The RateLimit header of a single zone: (r, t) or ().
sub rl {
    my ($r) = @_;
    my $v = hdr($r, 'RateLimit') // '';
    return $v =~ /^"([^"]+)";r=(\d+);t=(\d+)$/ ? ($2, $3, $1) : ();
}

# Runs $code->($try) until the timing it reports is valid (at most 3 tries).
sub timed_attempts {
    my ($name, $code) = @_;
    for my $try (1 .. 3) {
        my $obs = $code->($try);
        return $obs if $obs->{valid};
        diag("$name: timing assumption violated on try $try ($obs->{why}), retrying");
    }
    fail("$name: could not get valid timing in 3 tries (machine too loaded?)");
    return undef;
}

# warm up the connections to redis of both workers
$t->get_as('fe', 'warmup') for 1 .. 4;

# --- exact limit (limit=5 window=60s) ----------------------------------------------

{
    my $obs = timed_attempts('exact limit', sub {
        my ($try) = @_;
        my $t0 = ensure_room(60_000, 5_000);
        my @r = map { $t->get_as('fe', "ex$try") } 1 .. 7;
        my $t1 = $t->redis_time_ms;
        return { valid => window_end($t0, 60_000) == window_end($t1, 60_000), why => 'crossed a boundary',
                 r => \@r, key => "ex$try" };
    });
    if ($obs) {
        my @r = @{ $obs->{r} };
        is(join(' ', map { $_->{status} } @r), '200 200 200 200 200 429 429', 'limit=5: 5 pass, 6th and 7th 429');
        is(join(' ', map { hdr($_, 'X-RateLimit-Remaining') // '-' } @r), '4 3 2 1 0 0 0', 'remaining 4..0, then 0');
        is(join(' ', map { hdr($_, 'X-RL-Status') // '-' } @r),
            'PASSED PASSED PASSED PASSED PASSED REJECTED REJECTED', '$ratelimit_status');
        is($r[0]{content}, "index page\n", 'admitted request served the file');
        is(hdr($r[0], 'RateLimit-Policy'), '"fe";q=5;w=60', 'RateLimit-Policy "fe";q=5;w=60');
        # rejected requests are not counted: the status API reports 5 used
        my ($qr, $j) = query('fe', $obs->{key});
        is($qr->{status}, 200, 'status API on a fixed zone: 200');
        is($j && $j->[0]{used}, 5, 'status API: used 5 (the two rejections were not counted)')
            or diag($qr->{content});
        is($j && $j->[0]{remaining}, 0, 'status API: remaining 0');
        my $r = $t->get_as('fe', $obs->{key});
        is($r->{status}, 429, 'still rejected after the query');
    }
    is($t->get_as('fe', 'ex-other')->{status}, 200, 'other subject independent');
}

# --- headers, t, Reset, Retry-After; reset when Retry-After has passed ---------------
# zone fx: limit=2 window=5s

{
    my $obs = timed_attempts('headers', sub {
        my ($try) = @_;
        my $key = "hd$try";
        my $t0 = ensure_room(5000, 2500);
        my $end = window_end($t0, 5000);
        my (@r, @before, @after);
        for (1 .. 3) {
            push @before, $t->redis_time_ms;
            push @r, $t->get_as('fx', $key);
            push @after, $t->redis_time_ms;
        }
        my ($qr, $j) = query('fx', $key);
        my $tq = $t->redis_time_ms;
        return { valid => $tq < $end, why => 'crossed a boundary', r => \@r, before => \@before,
                 after => \@after, end => $end, key => $key, qr => $qr, j => $j };
    });
    if ($obs) {
        my @r = @{ $obs->{r} };
        my $end = $obs->{end};
        is(join(' ', map { $_->{status} } @r), '200 200 429', 'limit=2: 2 pass, 3rd 429');
        for my $i (0 .. 2) {
            my $n = $i + 1;
            my $r = $r[$i];
            is(hdr($r, 'RateLimit-Policy'), '"fx";q=2;w=5', "request $n: RateLimit-Policy \"fx\";q=2;w=5");
            my ($rem, $tt, $name) = rl($r);
            ok(defined $rem, "request $n: RateLimit header well-formed")
                or diag('RateLimit: ' . (hdr($r, 'RateLimit') // '<none>'));
            $tt //= -1;
            is($name, 'fx', "request $n: RateLimit name");
            is($rem, $i < 2 ? 1 - $i : 0, "request $n: RateLimit r");
            my $hi = ceil(($end - $obs->{before}[$i]) / 1000);
            my $lo = ceil(($end - $obs->{after}[$i]) / 1000);
            ok($tt >= $lo - 1 && $tt <= $hi + 1,
                "request $n: t=$tt = seconds to the window end (expected $lo..$hi, +-1)");
            ok($tt >= 1 && $tt <= 5, "request $n: t in [1,5]");
            is(hdr($r, 'X-RateLimit-Limit'), 2, "request $n: X-RateLimit-Limit");
            is(hdr($r, 'X-RateLimit-Remaining'), $i < 2 ? 1 - $i : 0, "request $n: X-RateLimit-Remaining");
            is(hdr($r, 'X-RateLimit-Reset'), $end / 1000, "request $n: X-RateLimit-Reset = window end ("
                . ($end / 1000) . ')');
            if ($i < 2) {
                ok(!defined hdr($r, 'Retry-After'), "request $n: no Retry-After on 200");
            } else {
                my $ra = hdr($r, 'Retry-After') // '';
                ok($ra =~ /^\d+$/ && $ra >= 1, "request $n: Retry-After ($ra) >= 1");
                is($ra, $tt, "request $n: Retry-After = t");
                ok($ra ne '' && $ra >= $lo - 1 && $ra <= $hi + 1,
                    "request $n: Retry-After consistent with the time to the window end ($lo..$hi, +-1)");
            }
        }
        # status API on the fixed zone: used 2, reset = window end
        my $j = $obs->{j};
        is($obs->{qr}{status}, 200, 'status API: 200');
        ok($j && $j->[0]{used} == 2 && $j->[0]{remaining} == 0 && $j->[0]{limit} == 2 && $j->[0]{window} == 5,
            'status API: limit 2, used 2, remaining 0, window 5') or diag($obs->{qr}{content});
        is($j && $j->[0]{reset}, $end / 1000, 'status API: reset = window end');
        ok($j && $j->[0]{retry_after} >= 1 && $j->[0]{retry_after} <= 5, 'status API: retry_after in [1,5]');

        # wait for Retry-After: the next window has a fresh counter
        my $ra = hdr($r[2], 'Retry-After') // 5;
        sleep($ra + 0.1);
        my $now = $t->redis_time_ms;
        ok($now >= $end, 'Retry-After seconds later the window has ended');
        my $b = $t->redis_time_ms;
        my $r4 = $t->get_as('fx', $obs->{key});
        my $a = $t->redis_time_ms;
        is($r4->{status}, 200, 'after Retry-After: admitted again');
        my ($rem, $tt) = rl($r4);
        is($rem, 1, 'after Retry-After: fresh counter, r=1');
        my $end2 = window_end($b, 5000);
        is(hdr($r4, 'X-RateLimit-Reset'), $end2 / 1000, 'after Retry-After: Reset = end of the new window');
        my ($lo, $hi) = (ceil(($end2 - $a) / 1000), ceil(($end2 - $b) / 1000));
        ok(defined $tt && $tt >= $lo - 1 && $tt <= $hi + 1 && $tt <= 5,
            "after Retry-After: t (" . ($tt // 'undef') . ") = seconds to the end of the new window ($lo..$hi, +-1)");
    }
}

# --- rate=2r/s algorithm=fixed: one-second windows --------------------------------

{
    my $obs = timed_attempts('rate 2r/s', sub {
        my ($try) = @_;
        my $t0 = wait_phase(1000, 100);
        my @r = map { $t->get_as('fr', "rs$try") } 1 .. 3;
        my $t1 = $t->redis_time_ms;
        return { valid => window_end($t0, 1000) == window_end($t1, 1000), why => 'crossed a boundary', r => \@r };
    });
    if ($obs) {
        my @r = @{ $obs->{r} };
        is(join(' ', map { $_->{status} } @r), '200 200 429', 'rate=2r/s fixed: 2 pass, 3rd 429 in the same second');
        is(hdr($r[0], 'RateLimit-Policy'), '"fr";q=2;w=1', 'rate=2r/s fixed: RateLimit-Policy "fr";q=2;w=1');
        my ($rem, $tt) = rl($r[2]);
        is($tt, 1, 'rate=2r/s fixed: t=1 on the 429');
        is(hdr($r[2], 'Retry-After'), 1, 'rate=2r/s fixed: Retry-After 1');
    }
}

# --- reset exactly at the window boundary (limit=3 window=2s) ------------------------

{
    my $obs = timed_attempts('boundary reset', sub {
        my ($try) = @_;
        my $key = "bd$try";
        my %o = (key => $key);
        my $t0 = wait_phase(2000, 200);
        my $end = window_end($t0, 2000);
        $o{first} = [ map { $t->get_as('fb', $key) } 1 .. 4 ];
        return { valid => 0, why => 'first requests too slow' } if $t->redis_time_ms >= $end - 500;

        wait_until_ms($end - 400);
        $o{before_ms} = $t->redis_time_ms;
        $o{before} = $t->get_as('fb', $key);
        my $after = $t->redis_time_ms;
        return { valid => 0, why => 'request before the boundary answered after it' } if $after >= $end;

        $o{at} = wait_until_ms($end + 30);
        $o{second} = [ map { $t->get_as('fb', $key) } 1 .. 4 ];
        return { valid => 0, why => 'requests after the boundary crossed the next one' }
            if $t->redis_time_ms >= $end + 2000;
        $o{end} = $end;
        $o{valid} = 1;
        return \%o;
    });
    if ($obs) {
        my $end = $obs->{end};
        is(join(' ', map { $_->{status} } @{ $obs->{first} }), '200 200 200 429', 'window 1: 3 pass, 4th 429');
        my $b = $obs->{before};
        is($b->{status}, 429, '400 ms before the boundary: still rejected');
        my ($rem, $tt) = rl($b);
        is($tt, 1, 't=1 shortly before the boundary');
        my $ra = hdr($b, 'Retry-After') // '';
        is($ra, 1, 'Retry-After 1 shortly before the boundary (' . ($end - $obs->{before_ms}) . ' ms left)');
        is(hdr($b, 'X-RateLimit-Reset'), $end / 1000, 'X-RateLimit-Reset = the boundary');

        my @s = @{ $obs->{second} };
        is(join(' ', map { $_->{status} } @s), '200 200 200 429',
            'just after the boundary: fresh counter, 3 pass, 4th 429');
        is(join(' ', map { hdr($_, 'X-RateLimit-Remaining') // '-' } @s), '2 1 0 0',
            'just after the boundary: remaining 2 1 0 0');
        is(hdr($s[0], 'X-RateLimit-Reset'), ($end + 2000) / 1000, 'just after the boundary: Reset = next boundary');
        my ($rem2, $tt2) = rl($s[0]);
        is($tt2, 2, 'just after the boundary: t=2');
    }
}

# --- the boundary burst: 2N within a short span (and not with sliding windows) ------

{
    my $obs = timed_attempts('boundary burst', sub {
        my ($try) = @_;
        my $key = "bu$try";
        my %o = (key => $key);
        my $t0 = wait_phase(2000, 1450);
        my $end = window_end($t0, 2000);
        my $start = time;
        $o{fixed1}   = [ map { $t->get_as('fb', $key) } 1 .. 3 ];
        $o{sliding1} = [ map { $t->get_as('sb', $key) } 1 .. 3 ];
        return { valid => 0, why => 'requests before the boundary answered after it' }
            if $t->redis_time_ms >= $end;

        wait_until_ms($end + 30);
        $o{fixed2}   = [ map { $t->get_as('fb', $key) } 1 .. 3 ];
        $o{span} = time - $start;
        $o{fixed3}   = $t->get_as('fb', $key);
        $o{sliding2} = $t->get_as('sb', $key);
        return { valid => 0, why => 'requests after the boundary crossed the next one' }
            if $t->redis_time_ms >= $end + 1900;
        $o{valid} = 1;
        return \%o;
    });
    if ($obs) {
        is(join(' ', map { $_->{status} } @{ $obs->{fixed1} }), '200 200 200', 'fixed: N=3 pass just before the boundary');
        is(join(' ', map { $_->{status} } @{ $obs->{fixed2} }), '200 200 200', 'fixed: N=3 more pass just after it');
        ok($obs->{span} < 1.5, sprintf('fixed: 2N = 6 admitted within %.2f s (< window 2 s)', $obs->{span}));
        is($obs->{fixed3}{status}, 429, 'fixed: the next one is rejected');
        is(join(' ', map { $_->{status} } @{ $obs->{sliding1} }), '200 200 200',
            'sliding (default algorithm): 3 pass before the boundary');
        is($obs->{sliding2}{status}, 429, 'sliding (default algorithm): rejected just after the boundary');
    }
}

# --- concurrency: 2 workers, 6 clients, exactly N pass --------------------------------

{
    my $obs = timed_attempts('concurrency', sub {
        my ($try) = @_;
        my $t0 = ensure_room(3_600_000, 30_000);
        my @res = $t->parallel_get(clients => 6, requests => 72, path => '/fc/index.html',
            headers => { 'X-Api-Key' => "conc$try" });
        my $t1 = $t->redis_time_ms;
        return { valid => window_end($t0, 3_600_000) == window_end($t1, 3_600_000),
                 why => 'crossed a boundary', res => \@res, key => "conc$try" };
    });
    if ($obs) {
        my @res = @{ $obs->{res} };
        is(scalar @res, 72, '72 responses received');
        my %by;
        $by{ $_->{status} }++ for @res;
        is($by{200} // 0, 20, 'exactly 20 admitted') or diag(explain \%by);
        is($by{429} // 0, 52, 'exactly 52 rejected');
        my %rs;
        $rs{ $_->{headers}{'x-rl-status'} // '' }++ for @res;
        is($rs{ERROR} // 0, 0, 'no redis errors') or diag(explain \%rs);
        my @rem = sort { $a <=> $b } map { $_->{headers}{'x-ratelimit-remaining'} // -1 }
            grep { $_->{status} == 200 } @res;
        is("@rem", join(' ', 0 .. 19), 'admitted requests saw remaining 19..0 once each');
        my @e = $t->access_entries_for('/fc/index.html', 72);
        my %pids = map { $_->{pid} => 1 } @e;
        is(scalar keys %pids, 2, 'both workers served requests');
        my $r = $t->get('/fc/index.html', { 'X-Api-Key' => $obs->{key} });
        is($r->{status}, 429, 'afterwards still rejected');
    }
}

$t->stop_nginx;
$t->no_alerts;

done_testing;
