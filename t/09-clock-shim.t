#!/usr/bin/perl
# The tests' clock shim (t/lib/clock_shim.c): one clock file moves the wall
# clock of a process, of a redis-server and of two nginx servers at once
# (set_clock), to the last second of November in Europe/Berlin and to the
# second before its spring DST change, and time goes on from there; Redis's
# expiries and the module's fixed windows follow it; the monotonic clocks
# do not move (nginx's timers).  Each time the shim moves is bracketed by
# the test's own reading of the clock (clock_now) before and after.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use IO::Socket::INET;
use IO::Select;
use Time::HiRes qw(time sleep clock_gettime CLOCK_MONOTONIC);
use Time::Local qw(timegm);
use RateLimitTest qw(hdr);

RateLimitTest::require_module();

# 2026-11-30T23:00:00Z is midnight of 1 December in Berlin; 2027-03-28
# 01:00:00Z its clocks' spring forward.
my $MONTH_END = timegm(59, 59, 22, 30, 10, 2026);
my $DST_SPRING = timegm(59, 59, 0, 28, 2, 2027);
# The slack of a bracket, s: $msec's and the clocks' rounding, not load.
my $SLACK = 0.002;

my $t = RateLimitTest->new(workers => 2);
my $t2 = RateLimitTest->new(workers => 2, clock => $t);

# True if $v lies between the clock's readings $lo and $hi.
sub within {
    my ($v, $lo, $hi) = @_;
    return defined $v && $v >= $lo - $SLACK && $v <= $hi + $SLACK;
}

# ($lo, $value of $code, $hi): the clock's readings around $code.
sub bracket {
    my ($code) = @_;
    my $lo = $t->clock_now;
    my $v = $code->();
    return ($lo, $v, $t->clock_now);
}

# An HTTP date's epoch seconds ("Mon, 30 Nov 2026 22:59:59 GMT"), or undef.
my %MONTH = (Jan => 0, Feb => 1, Mar => 2, Apr => 3, May => 4, Jun => 5,
             Jul => 6, Aug => 7, Sep => 8, Oct => 9, Nov => 10, Dec => 11);
sub http_date {
    my ($s) = @_;
    return undef unless ($s // '') =~ /^\w+, (\d+) (\w+) (\d+) (\d+):(\d+):(\d+) GMT$/;
    return timegm($6, $5, $4, $1, $MONTH{$2}, $3);
}

sub redis_time {
    my $r = $t->redis('TIME');
    return $r->[0] + $r->[1] / 1e6;
}

# --- a process's clocks -----------------------------------------------------

# What a perl started on the clock reads: time(), gettimeofday,
# CLOCK_REALTIME, CLOCK_REALTIME_COARSE and CLOCK_MONOTONIC.
sub clocks_of_a_process {
    my $env = $t->clock_env(1);
    local @ENV{keys %$env} = values %$env;
    my @v = split ' ', `$^X -MTime::HiRes=gettimeofday,clock_gettime,CLOCK_REALTIME,CLOCK_REALTIME_COARSE,CLOCK_MONOTONIC -e 'printf "%d %.6f %.6f %.6f %.6f", time, scalar(gettimeofday), clock_gettime(CLOCK_REALTIME), clock_gettime(CLOCK_REALTIME_COARSE), clock_gettime(CLOCK_MONOTONIC)'`;
    return @v;
}

{
    $t->set_clock($MONTH_END);
    my $mono_lo = clock_gettime(CLOCK_MONOTONIC);
    my ($lo, $v, $hi) = bracket(sub { [clocks_of_a_process()] });
    my $mono_hi = clock_gettime(CLOCK_MONOTONIC);
    my ($secs, $tod, $real, $coarse, $mono) = @$v;
    ok($secs >= int($lo) && $secs <= $hi, "time(): $secs, the set clock ($lo .. $hi)");
    ok(within($tod, $lo, $hi), "gettimeofday: $tod ($lo .. $hi)");
    ok(within($real, $lo, $hi), "CLOCK_REALTIME: $real ($lo .. $hi)");
    # The coarse clock lags by up to a tick (4 ms at HZ=250, 10 at 100).
    ok(within($coarse, $lo - 0.02, $hi), "CLOCK_REALTIME_COARSE: $coarse ($lo .. $hi)");
    ok($mono >= $mono_lo && $mono <= $mono_hi,
        "CLOCK_MONOTONIC not moved: $mono ($mono_lo .. $mono_hi)");
}

# --- Redis ----------------------------------------------------------------

$t->start_redis(clock => 1);

{
    $t->set_clock($MONTH_END);
    my ($lo, $v, $hi) = bracket(\&redis_time);
    ok(within($v, $lo, $hi), "Redis TIME reads the set clock: $v ($lo .. $hi)");
    ok($v >= $MONTH_END && $v < $MONTH_END + 0.5, "... 2026-11-30T22:59:59Z");
    sleep 1;
    ($lo, $v, $hi) = bracket(\&redis_time);
    ok(within($v, $lo, $hi) && $v >= $MONTH_END + 1,
        "a second later Redis TIME has gone on a second: $v ($lo .. $hi)");

    # A clock already running is set again: the running Redis reads it.
    $t->set_clock($DST_SPRING);
    ($lo, $v, $hi) = bracket(\&redis_time);
    ok(within($v, $lo, $hi) && $v < $DST_SPRING + 0.5,
        "set again, Redis TIME reads 2027-03-28T00:59:59Z: $v ($lo .. $hi)");
}

# Redis's expiry follows the clock: a key SET to expire a second after the
# set time (PXAT) lives that second.
{
    $t->set_clock($MONTH_END);
    my $at = $MONTH_END + 1;
    $t->redis('SET', 'clock:pxat', 'v', 'PXAT', $at * 1000);
    my ($last_seen, $gone);
    my $deadline = time + 3;
    while (time < $deadline) {
        my ($lo, $v, $hi) = bracket(sub { $t->redis('GET', 'clock:pxat') });
        if (defined $v) {
            $last_seen = $lo;
        } else {
            $gone = $hi;
            last;
        }
        sleep 0.01;
    }
    ok(defined $last_seen && $last_seen >= $at - 0.1
        && defined $gone && $gone >= $at && $gone < $at + 0.1,
        "a key SET with PXAT $at lives until then: seen at "
        . ($last_seen // 'never') . ', gone at ' . ($gone // 'never'));
}

# --- two nginx servers on the clock ---------------------------------------

my $REDIS_PORT = $t->redis_port;
my $SILENT = IO::Socket::INET->new(LocalAddr => '127.0.0.1',
    LocalPort => $t->port('SILENT'), Listen => 8, ReuseAddr => 1)
    or die "listen: $!";

# A fixed window of a minute, limit 2 across both servers.
my $CONF = <<"EOF" . <<'EOF';
ratelimit_redis 127.0.0.1:$REDIS_PORT timeout=1s;
upstream silent { server 127.0.0.1:${\ $t->port('SILENT')}; }
EOF
ratelimit_zone minute key=$http_x_api_key limit=2 window=60s algorithm=fixed;
log_format clock '$msec $status $http_x_api_key';
server {
    listen 127.0.0.1:%%PORT%%;
    access_log %%TMP%%/clock.log clock;
    add_header X-Now $msec always;
    location /plain/ { alias %%TMP%%/html/; }
    location /minute/ { ratelimit zone=minute; alias %%TMP%%/html/; }
    location /silent/ { proxy_pass http://silent/; proxy_read_timeout 1s; }
}
EOF
for my $s ($t, $t2) {
    $s->write_conf($CONF);
    $s->start_nginx(clock => 1);
}

{
    $t->set_clock($DST_SPRING);
    for my $s ([first => $t], [second => $t2]) {
        my ($name, $srv) = @$s;
        my ($lo, $r, $hi) = bracket(sub { $srv->get('/plain/index.html') });
        my $now = hdr($r, 'X-Now');
        ok(within($now, $lo, $hi), "$name nginx: \$msec $now reads the set clock ($lo .. $hi)");
        my $date = http_date(hdr($r, 'Date'));
        ok(defined $date && $date >= int($lo) && $date <= $hi,
            "$name nginx: Date " . (hdr($r, 'Date') // '-') . ' is the set clock\'s');
    }
    my $logged;
    RateLimitTest::wait_until(sub {
        open my $fh, '<', $t->tmp . '/clock.log' or return 0;
        ($logged) = join('', <$fh>) =~ /^(\d+\.\d+) 200 -$/m;
    }, 2);
    ok(defined $logged && $logged >= $DST_SPRING && $logged < $DST_SPRING + 1,
        'its access log has the set clock: ' . ($logged // '-'));
}

# The module's fixed window follows Redis's clock and its Reset the window
# nginx's and Redis's clocks agree on: the month's last second is the last
# of a window, which ends at the month's end.
my $BOUNDARY = $MONTH_END + 1;
{
    $t->set_clock($MONTH_END);
    my @r = ($t->get_as('minute', 'm'), $t2->get_as('minute', 'm'),
             $t->get_as('minute', 'm'), $t2->get_as('minute', 'm'));
    is(join(' ', map { "$_->{status}/" . (hdr($_, 'X-RateLimit-Reset') // '-') } @r),
        join(' ', map { "$_/$BOUNDARY" } 200, 200, 429, 429),
        'limit 2 across both servers in the month\'s last second, Reset at its end');

    # Real time goes on past the boundary, the clock with it: a new window.
    my $now = $t->clock_now;
    sleep($BOUNDARY + 0.2 - $now) if $now < $BOUNDARY + 0.2;
    my $r = $t2->get_as('minute', 'm');
    is($r->{status}, 200, 'past the month\'s end: admitted in a new window');
    is(hdr($r, 'X-RateLimit-Reset'), $BOUNDARY + 60, '... which ends a minute later');
    @r = ($t->get_as('minute', 'm'), $t2->get_as('minute', 'm'));
    is(join(' ', map { "$_->{status}/" . (hdr($_, 'X-RateLimit-Reset') // '-') } @r),
        join(' ', map { "$_/" . ($BOUNDARY + 60) } 200, 429), '... and holds 2');

    # The clock moved on a minute: the next window.
    $t->set_clock($BOUNDARY + 60.5);
    $r = $t->get_as('minute', 'm');
    is($r->{status}, 200, 'the clock moved a minute on: admitted again');
    is(hdr($r, 'X-RateLimit-Reset'), $BOUNDARY + 120, '... in the window after');
}

# nginx's timers keep to the monotonic clock: a proxy_read_timeout of 1 s
# fires a second after the request although the wall clock jumps a day
# meanwhile (bytes on the connection wake the worker after the jump).
{
    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t->port,
        Proto => 'tcp') or die "connect: $!";
    my $t0 = time;
    syswrite($c, "GET /silent/ HTTP/1.1\r\nHost: x\r\n\r\n");
    sleep 0.3;
    $t->set_clock($t->clock_now + 86400);
    syswrite($c, "GET /plain/");
    my $reply = '';
    while (IO::Select->new($c)->can_read(5)) {
        last unless sysread($c, $reply, 4096, length $reply);
        last if $reply =~ /\r\n\r\n/;
    }
    my $elapsed = time - $t0;
    my ($status) = $reply =~ m{^HTTP/1\.1 (\d+)};
    ok(($status // 0) == 504 && $elapsed >= 0.95 && $elapsed < 2,
        sprintf('the silent upstream times out (%s) after its second (%.3f s), '
                . 'the day\'s jump aside', $status // 'no reply', $elapsed));
}

$_->no_alerts for $t, $t2;

done_testing();
