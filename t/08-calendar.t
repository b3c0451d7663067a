#!/usr/bin/perl
# Calendar zones (issue 42): `window=day|week|month|year [tz=AREA/CITY]
# [start=...]`.  One Redis and two nginx servers of two workers each on one
# clock (the clock shim: t/09), which the test sets a little before each
# boundary; the clock then runs past it as real time does.
#
# Expected (docs/directives.md, docs/operations.md):
# - exactly the limit across both servers in the period's last seconds,
#   X-RateLimit-Reset the boundary, RateLimit-Policy w the period's own
#   length; past the boundary the limit again, Reset the next period's end:
#   Berlin's month end (Nov 30 23:00 UTC), its spring and autumn days of
#   23 and 25 hours (counts reset at local midnight), a week from Monday
#   (start=mon and the default; start=sun does not reset then), a day of
#   tz unset (UTC midnight), a billing day of 31 in February (Feb 28 2027,
#   Feb 29 2028, local midnight);
# - w of a month of 28, 29, 30 and 31 days;
# - costs and settles in a monthly token budget (a settle after its
#   month's end changes nothing); a monthly zone with quota
#   leases: never more than the limit in a period, and its leases die with
#   their period (Redis's count of the next is what it admitted);
# - a server whose clock is 3 minutes ahead of Redis's (or behind) counts
#   into the period Redis's clock is in, at a boundary;
# - a rejection a worker remembers tells the w and end of the period its
#   clock is in, as Redis's did (in a period's first half too);
# - a subject's override (PUT limit=5) is its limit per period; a dry run
#   passes what it would reject; a peek counts nothing; with Redis away,
#   `ratelimit_fail local` admits a server's share per period; a reload
#   that changes a zone's tz= warns;
# - the status API names the period in the zone's time zone, and the
#   metrics' JSON the zone's type, period and tz;
# - `nginx -t` fails with file and line on an unknown tz, an unreadable or
#   malformed zone file, one not a regular file (a FIFO), a bad start=,
#   tz= without a calendar window, algorithm=gcra with window=month.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use Time::Local qw(timegm);
use JSON::PP;
use POSIX ();
use HTTP::Tiny;
use RateLimitTest qw(hdr);
use TokenBackend;

RateLimitTest::require_module();

# Seconds since 1970 of a UTC date and time.
sub utc {
    my ($y, $mo, $d, $h, $mi) = @_;
    return timegm(0, $mi // 0, $h // 0, $d, $mo - 1, $y);
}

my $DAY = 86400;
# Each boundary case starts this long before it: room for its requests
# however loaded the machine, the clock running on past it.
my $LEAD = 2;

my $t = RateLimitTest->new(workers => 2);
my $t2 = RateLimitTest->new(workers => 2, clock => $t);
# A third server on a clock of its own, minutes off Redis's.
my $off = RateLimitTest->new(workers => 1);
$t->start_redis(clock => 1);
my $REDIS_PORT = $t->redis_port;
# A model that answers its token count after holding the request.
my $BACKEND = $t->port('BACKEND');
TokenBackend::start($t, $BACKEND);

my $CONF = <<"EOF" . <<'EOF';
ratelimit_redis 127.0.0.1:$REDIS_PORT timeout=2s;
upstream model { server 127.0.0.1:$BACKEND; }
EOF
ratelimit_zone month key=$http_x_api_key limit=3 window=month tz=Europe/Berlin;
ratelimit_zone day key=$http_x_api_key limit=3 window=day tz=Europe/Berlin;
ratelimit_zone utc_day key=$http_x_api_key limit=3 window=day;
ratelimit_zone bill key=$http_x_api_key limit=3 window=month start=31 tz=Europe/Berlin;
ratelimit_zone week key=$http_x_api_key limit=3 window=week start=mon tz=Europe/Berlin;
ratelimit_zone week_default key=$http_x_api_key limit=3 window=week tz=Europe/Berlin;
ratelimit_zone week_sun key=$http_x_api_key limit=3 window=week start=sun tz=Europe/Berlin;
ratelimit_zone tokens key=$http_x_api_key limit=100 window=month algorithm=fixed tz=Europe/Berlin;
ratelimit_zone leased key=$http_x_api_key limit=400 window=month tz=Europe/Berlin lease=1m;
server {
    listen 127.0.0.1:%%PORT%%;
    location /month/ {
        ratelimit zone=month;
        ratelimit_peek_header X-Peek;
        alias %%TMP%%/html/;
    }
    location /month_local/ {
        ratelimit zone=month;
        ratelimit_fail local servers=2;
        alias %%TMP%%/html/;
    }
    location /month_dry/ {
        ratelimit zone=month dry_run;
        add_header X-RL-Status $ratelimit_status always;
        alias %%TMP%%/html/;
    }
    location /day/ { ratelimit zone=day; alias %%TMP%%/html/; }
    location /utc_day/ { ratelimit zone=utc_day; alias %%TMP%%/html/; }
    location /bill/ { ratelimit zone=bill; alias %%TMP%%/html/; }
    location /week/ { ratelimit zone=week; alias %%TMP%%/html/; }
    location /week_default/ { ratelimit zone=week_default; alias %%TMP%%/html/; }
    location /week_sun/ { ratelimit zone=week_sun; alias %%TMP%%/html/; }
    location /tokens/ {
        ratelimit zone=tokens cost=$arg_cost;
        ratelimit_settle zone=tokens $arg_used;
        alias %%TMP%%/html/;
    }
    location /model/ {
        ratelimit zone=tokens cost=$arg_cost;
        ratelimit_settle zone=tokens $upstream_http_x_usage_tokens;
        proxy_pass http://model/;
    }
    location /leased/ { ratelimit zone=leased; alias %%TMP%%/html/; }
    location = /q { ratelimit_query zone=month zone=tokens zone=leased override=on; }
    location = /metrics { ratelimit_metrics; }
}
EOF

for my $s ($t, $t2, $off) {
    $s->write_conf($CONF);
    $s->start_nginx(clock => 1);
}
my @SERVERS = ($t, $t2);

# The statuses of requests of `key` at /$loc/ (with `query`), the servers
# taking turns, and the responses.
sub turns {
    my ($loc, $key, $n, $query) = @_;
    my @r = map {
        $SERVERS[$_ % 2]->get("/$loc/index.html" . ($query // ''),
                              { 'X-Api-Key' => $key })
    } 0 .. $n - 1;
    return (join(' ', map { $_->{status} } @r), @r);
}

sub window_of {
    my ($p) = RateLimitTest::parse_policy(hdr($_[0], 'RateLimit-Policy'));
    return $p ? $p->{w} : '-';
}
sub reset_of { hdr($_[0], 'X-RateLimit-Reset') // '-' }

# Lets the clock run past `at` (plus a margin): real time goes on.
sub run_past {
    my ($at) = @_;
    my $wait = $at + 0.15 - $t->clock_now;
    sleep $wait if $wait > 0;
}

# The limit (3) in the period's last seconds on both servers, Reset the
# boundary and w the period's length; then past the boundary the limit
# again, Reset `next` and w `w_after`.  `key` is the case's own.
sub across {
    my (%c) = @_;
    my $name = $c{name};
    $t->set_clock($c{at} - $LEAD);
    my ($st, @r) = turns($c{loc}, $c{key}, 4);
    is($st, '200 200 200 429', "$name: 3 across both servers before");
    is(reset_of($r[0]) . ' ' . window_of($r[0]), "$c{at} $c{w}",
        "$name: Reset the boundary, w $c{w}");
    ok($t->clock_now < $c{at}, "$name: ... all before the boundary");
    run_past($c{at});
    ($st, @r) = turns($c{loc}, $c{key}, 4);
    is($st, '200 200 200 429', "$name: 3 again past the boundary");
    is(reset_of($r[0]) . ' ' . window_of($r[0]), "$c{next} $c{w_after}",
        "$name: Reset $c{next}, w $c{w_after}");
}

# --- Berlin's month end -------------------------------------------------------

across(name => 'Berlin November to December', loc => 'month', key => 'm1',
       at => utc(2026, 11, 30, 23), w => 30 * $DAY,
       next => utc(2026, 12, 31, 23), w_after => 31 * $DAY);

# --- daylight saving time: days of 23 and 25 hours ----------------------------

# Berlin's local midnights: UTC 23:00 in winter, 22:00 in summer.
for my $c (['spring: into the day of 23 h', utc(2026, 3, 28, 23), $DAY,
            utc(2026, 3, 29, 22), 23 * 3600],
           ['spring: out of the day of 23 h', utc(2026, 3, 29, 22), 23 * 3600,
            utc(2026, 3, 30, 22), $DAY],
           ['autumn: into the day of 25 h', utc(2026, 10, 24, 22), $DAY,
            utc(2026, 10, 25, 23), 25 * 3600],
           ['autumn: out of the day of 25 h', utc(2026, 10, 25, 23), 25 * 3600,
            utc(2026, 10, 26, 23), $DAY])
{
    my ($name, $at, $w, $next, $w_after) = @$c;
    across(name => $name, loc => 'day', key => $name, at => $at, w => $w,
           next => $next, w_after => $w_after);
}

# --- tz unset: UTC --------------------------------------------------------------

across(name => 'tz unset: UTC midnight', loc => 'utc_day', key => 'u1',
       at => utc(2026, 11, 16, 0), w => $DAY,
       next => utc(2026, 11, 17, 0), w_after => $DAY);

# --- weeks from Monday ----------------------------------------------------------

{
    my $monday = utc(2026, 11, 15, 23);
    for my $loc (qw(week week_default)) {
        across(name => "$loc: Monday 00:00 in Berlin", loc => $loc,
               key => 'w1', at => $monday, w => 7 * $DAY,
               next => $monday + 7 * $DAY, w_after => 7 * $DAY);
    }
    # A week from Sunday: still the one that began a day before.
    $t->set_clock($monday - $LEAD);
    my ($st) = turns('week_sun', 'w1', 4);
    is($st, '200 200 200 429', 'week_sun: 3 before Monday');
    run_past($monday);
    my @r;
    ($st, @r) = turns('week_sun', 'w1', 1);
    is($st . ' ' . reset_of($r[0]), '429 ' . ($monday - $DAY + 7 * $DAY),
        'week_sun: still full past Monday, until Sunday');
}

# --- a billing day of 31 in February ------------------------------------------

across(name => 'billing day 31, 2027', loc => 'bill', key => 'b1',
       at => utc(2027, 2, 27, 23), w => 28 * $DAY,
       next => utc(2027, 3, 30, 22), w_after => 31 * $DAY - 3600);
across(name => 'billing day 31, 2028 (leap)', loc => 'bill', key => 'b2',
       at => utc(2028, 2, 28, 23), w => 29 * $DAY,
       next => utc(2028, 3, 30, 22), w_after => 31 * $DAY - 3600);

# --- months of 28, 29, 30 and 31 days -------------------------------------------

for my $m ([2027, 2, 28, utc(2027, 2, 28, 23)],
           [2028, 2, 29, utc(2028, 2, 29, 23)],
           [2027, 4, 30, utc(2027, 4, 30, 22)],
           [2027, 1, 31, utc(2027, 1, 31, 23)])
{
    my ($y, $mo, $days, $end) = @$m;
    $t->set_clock(utc($y, $mo, 10, 12));
    my (undef, $r) = turns('month', "len-$y-$mo", 1);
    is(window_of($r) . ' ' . reset_of($r), ($days * $DAY) . " $end",
        "$y-$mo: a month of $days days, ending at $end");
}

# --- a server whose clock is minutes off Redis's ------------------------------

{
    my $at = utc(2026, 12, 31, 23);
    my $jan = utc(2027, 1, 31, 23);
    # Redis a minute before the new year in Berlin, the server 2 minutes
    # into it: Redis's year it is.
    $t->set_clock($at - 60);
    $off->set_clock($at + 120);
    my @r = ($off->get_as('month', 'skew'), $t->get_as('month', 'skew'),
             $off->get_as('month', 'skew'), $t2->get_as('month', 'skew'));
    is(join(' ', map { "$_->{status}/" . reset_of($_) } @r),
        join(' ', map { "$_/$at" } 200, 200, 200, 429),
        'a server 3 minutes ahead counts into the period of Redis\'s clock');
    is(window_of($r[0]), 31 * $DAY, '... whose w is December\'s');

    # Redis past the boundary, the server 3 minutes ahead still.
    $t->set_clock($at + 1);
    $off->set_clock($at + 181);
    @r = ($off->get_as('month', 'skew'), $t->get_as('month', 'skew'));
    is(join(' ', map { "$_->{status}/" . reset_of($_) } @r),
        "200/$jan 200/$jan", '... and into the next once Redis is in it');

    # 3 minutes behind: the server in the old year, Redis in the new.
    $t->set_clock($at + 60);
    $off->set_clock($at - 120);
    @r = ($off->get_as('month', 'skew'), $t->get_as('month', 'skew'));
    is(join(' ', map {
            "$_->{status}/" . (hdr($_, 'X-RateLimit-Remaining') // '-') . '/'
            . reset_of($_) } @r),
        "200/0/$jan 429/0/$jan",
        'a server 3 minutes behind counts into Redis\'s new period too');
}

# --- a monthly token budget: costs and settles ----------------------------------

sub used {
    my ($key, $zone) = @_;
    my $r = $t->get("/q?key=$key");
    my $j = eval { decode_json($r->{content}) };
    my ($z) = grep { $_->{zone} eq $zone } ref $j eq 'ARRAY' ? @$j : ();
    return $z // {};
}

{
    my $at = utc(2027, 5, 31, 22);   # June 1 00:00 in Berlin
    $t->set_clock($at - 3 * $LEAD);
    # Reserve 40, use 10: 30 counted; 80 more does not fit, 70 does.
    my ($st) = turns('tokens', 'tok', 3, '?cost=40&used=10');
    is($st, '200 200 200', 'tokens: 3 requests reserve 40 each, use 10');
    RateLimitTest::wait_until(sub { (used('tok', 'tokens')->{used} // 0) == 30 }, 3);
    is(used('tok', 'tokens')->{used}, 30, '... 30 counted once settled');
    ($st) = turns('tokens', 'tok', 1, '?cost=80&used=80');
    is($st, '429', '... 80 more do not fit in 100');
    ($st) = turns('tokens', 'tok', 1, '?cost=70&used=70');
    is($st, '200', '... 70 do');
    RateLimitTest::wait_until(sub { (used('tok', 'tokens')->{used} // 0) == 100 }, 3);
    ($st) = turns('tokens', 'tok', 1, '?cost=1&used=1');
    is($st, '429', '... and the budget is spent');
    my $z = used('tok', 'tokens');
    is(join(' ', map { $z->{$_} // '-' } qw(type period_start period_end)),
        'calendar 2027-05-01T00:00:00+02:00 2027-06-01T00:00:00+02:00',
        'the status API names May in Berlin\'s time');
    run_past($at);
    ($st) = turns('tokens', 'tok', 2, '?cost=60&used=50');
    is($st, '200 429', 'June: a new budget of 100');
    RateLimitTest::wait_until(sub { (used('tok', 'tokens')->{used} // 0) == 50 }, 3);
    $z = used('tok', 'tokens');
    is(join(' ', map { $z->{$_} // '-' } qw(used period_start period_end)),
        '50 2027-06-01T00:00:00+02:00 2027-07-01T00:00:00+02:00',
        '... 50 counted in June');
}

# A response streamed across the month's end: its settle goes to the month
# the request was counted in, which has ended, and changes nothing.
{
    my $at = utc(2027, 6, 30, 22);   # July 1 00:00 in Berlin
    $t->set_clock($at - 0.5);
    my $r = $t->get('/model/x?cost=40&mode=value&val=90&hold=1500',
                    { 'X-Api-Key' => 'late' });
    is($r->{status} . ' ' . reset_of($r), "200 $at",
        'tokens: a request of June, answered in July');
    ok($t->clock_now > $at + 0.5, '... 1.5 s later');
    sleep 0.3;    # the settle goes at the log phase
    my $z = used('late', 'tokens');
    is(join(' ', map { $z->{$_} // '-' } qw(used period_start)),
        '0 2027-07-01T00:00:00+02:00', '... its settle of 50 more is not July\'s');
    my ($st) = turns('tokens', 'late', 1, '?cost=100&used=100');
    is($st, '200', '... whose budget is whole');
}

# --- a monthly zone with quota leases -------------------------------------------

# Requests of `key` at /leased/, the servers taking turns, until `n` or
# the clock reaches `until`, `pause` seconds apart: how many, and how many
# were admitted.
sub hammer {
    my ($key, $n, $until, $pause) = @_;
    my ($sent, $admitted) = (0, 0);
    while ($sent < $n && (!defined $until || $t->clock_now < $until)) {
        my $r = $SERVERS[$sent++ % 2]->get_as('leased', $key);
        $admitted++ if $r->{status} == 200;
        sleep $pause if $pause;
    }
    return ($sent, $admitted);
}

{
    my $at = utc(2027, 7, 31, 22);   # August 1 00:00 in Berlin
    $t->set_clock($at - $LEAD - 1);
    # The subject hot up to the boundary, under its limit: both servers
    # hold July's leases then.
    my ($sent, $admitted) = hammer('hot', 400, $at - 0.3, 0.01);
    is($admitted, $sent, "leases: July's $sent requests admitted");
    run_past($at);
    # July's leases die at July's end: August's admissions are August's
    # grants, at most the limit.
    ($sent, $admitted) = hammer('hot', 450);
    ok($admitted <= 400 && $admitted >= 350,
        "... $admitted of $sent admitted in August, at most its 400");
    RateLimitTest::wait_until(sub {
        (used('hot', 'leased')->{used} // -1) == $admitted }, 5);
    my $z = used('hot', 'leased');
    is(join(' ', map { $z->{$_} // '-' } qw(used period_end)),
        "$admitted 2027-09-01T00:00:00+02:00",
        '... and once the subject is quiet, Redis\'s count of August is '
        . 'theirs');
}

# --- a subject's override: its own limit per period ------------------------

{
    my $at = utc(2027, 9, 30, 22);   # October 1 00:00 in Berlin
    $t->set_clock($at - $LEAD - 1);
    my $put = HTTP::Tiny->new(timeout => 5)->request(
        'PUT', $t->url('/q?zone=month&key=vip&limit=5'));
    is($put->{status}, 204, 'PUT limit=5 in a calendar zone: 204');
    my ($st, @r) = turns('month', 'vip', 6);
    is($st, '200 200 200 200 200 429',
        '... 5 in September for that subject, across both servers');
    is((hdr($r[0], 'X-RateLimit-Limit') // '-') . ' ' . reset_of($r[0]),
        "5 $at",
        '... its limit, until the month\'s end');
    run_past($at);
    ($st) = turns('month', 'vip', 6);
    is($st, '200 200 200 200 200 429', '... and 5 again in October');
}

# --- dry run and peeks ------------------------------------------------------------

{
    my $at = utc(2027, 10, 31, 23);   # November 1 00:00 in Berlin
    $t->set_clock($at - 600);
    my ($st, @r) = turns('month_dry', 'dry', 4);
    is($st . ' ' . join(' ', map { hdr($_, 'X-RL-Status') // '-' } @r),
        '200 200 200 200 PASSED PASSED PASSED REJECTED_DRY_RUN',
        'dry run: the 4th would have been rejected, and passes');
    my $peek = sub {
        my $r = $t2->get('/month/index.html',
                         { 'X-Api-Key' => 'dry', 'X-Peek' => 1 });
        my $j = eval { decode_json($r->{content}) };
        my $z = ref $j eq 'ARRAY' ? $j->[0] : {};
        return join(' ', map { $z->{$_} // '-' }
                         qw(used remaining reset period_start period_end));
    };
    my $want = "3 0 $at 2027-10-01T00:00:00+02:00 2027-11-01T00:00:00+01:00";
    is($peek->(), $want,
        'a peek: 3 counted (not the 4th), October in Berlin\'s time');
    is($peek->(), $want, '... and the peek counted nothing');
}

# --- rejections from a worker's memory ----------------------------------------

# In the first half of November (30 days) the call names October's end
# too, a month of 31 days and an hour: a rejection the worker remembers
# (no call) tells November's w and end as Redis's did.
{
    my $nov = utc(2027, 11, 10, 12);
    $t->set_clock($nov);
    my $hits = sub {
        decode_json($t->get('/metrics?format=json')->{content})
            ->{limit_reqs}{month}{deny_cache_hits} // 0;
    };
    my $before = $hits->();
    my @r = map { $t->get_as('month', 'memo') } 1 .. 9;
    is(join(' ', map { $_->{status} } @r),
        '200 200 200 ' . join(' ', ('429') x 6), 'memory: 3 of 9 in November');
    is($hits->() - $before >= 4 ? 'hits' : 'no hits', 'hits',
        '... the worker remembered the rejections');
    my %told = map { window_of($_) . ' ' . reset_of($_) => 1 } @r;
    is(join(', ', sort keys %told),
        (30 * $DAY) . ' ' . utc(2027, 11, 30, 23),
        '... each telling November\'s w and end');
}

# --- the metrics' zone object ---------------------------------------------------

{
    my $j = decode_json($t->get('/metrics?format=json')->{content});
    my $z = $j->{limit_reqs}{month} // {};
    is(join(' ', map { $z->{$_} // '-' } qw(type period tz)),
        'calendar month Europe/Berlin', 'metrics: type, period and tz');
    $z = $j->{limit_reqs}{utc_day} // {};
    is(join(' ', map { $z->{$_} // '-' } qw(tz window)), 'UTC 86400',
        '... tz unset is UTC');
}

# --- fail local: a server's share per period -----------------------------------

{
    my $at = utc(2027, 12, 31, 23);   # 2028 in Berlin
    $t->set_clock($at - $LEAD);
    $t->stop_redis;
    my @r = map { $t->get_as('month_local', 'loc') } 1 .. 3;
    is(join(' ', map { $_->{status} } @r), '200 200 429',
        'Redis away: this server\'s share of 3 among 2, per month');
    is((hdr($r[0], 'X-RateLimit-Limit') // '-') . ' ' . reset_of($r[0]),
        "2 $at", '... until December\'s end in Berlin');
    run_past($at);
    @r = map { $t->get_as('month_local', 'loc') } 1 .. 3;
    is(join(' ', map { "$_->{status}/" . reset_of($_) } @r),
        join(' ', map { "$_/" . utc(2028, 1, 31, 23) } 200, 200, 429),
        '... and 2 again in January');
}

# --- a reload that changes a zone's periods warns ----------------------------

{
    (my $conf = $CONF) =~ s/(zone month .*?) tz=Europe\/Berlin/$1 tz=Europe\/Paris/;
    $off->write_conf($conf);
    my $line = $off->conf_line(qr/ratelimit_zone month /);
    $off->reload;
    is($off->wait_log(qr/\[warn\] .*zone "month" changed its calendar periods \(window=, start= or tz=\): its counts in Redis start afresh; .* in \S*nginx\.conf:$line\b/, 1), 1,
        'a reload from tz=Europe/Berlin to Europe/Paris warns at the zone\'s line');
    is($off->count_log(qr/zone "(?!month")\w+" changed/), 0,
        '... of that zone alone');
}

$_->no_alerts for $t, $t2, $off;

# --- nginx -t -------------------------------------------------------------------

my $cfg = RateLimitTest->new(workers => 1);
my $tzdir = $cfg->tmp . '/zoneinfo';
mkdir $tzdir;
mkdir "$tzdir/Bad";
open my $fh, '>', "$tzdir/Bad/Zone" or die $!;
print $fh "TZif2 is not enough\n";
close $fh;
# A FIFO in the zones' directory: opened, it waited for a writer (nginx -t
# hung).
POSIX::mkfifo("$tzdir/Bad/Fifo", 0644) or die "mkfifo: $!";

for my $case (
    ['tz=Europe/Berln window=month',
     qr{unknown time zone "Europe/Berln": there is no /usr/share/zoneinfo/Europe/Berln; check the name},
     undef],
    ['tz=Europe window=month',
     qr{unknown time zone "Europe": /usr/share/zoneinfo/Europe is a directory of zones}, undef],
    ['tz=Bad/Zone window=month',
     qr{time zone file "\Q$tzdir\E/Bad/Zone" of tz=Bad/Zone is not one nginx reads \(.+\): reinstall},
     $tzdir],
    ['tz=Europe/Berlin window=month', qr{unknown time zone "Europe/Berlin": there is no \Q$tzdir\E/Europe/Berlin},
     $tzdir],
    ['tz=Bad/Fifo window=month',
     qr{time zone file "\Q$tzdir\E/Bad/Fifo" of tz=Bad/Fifo is not a regular file},
     $tzdir],
    ['window=month start=32', qr{invalid start "32": a month starts on a day 1 to 31}, undef],
    ['window=1d tz=Europe/Berlin',
     qr{"tz=" applies to calendar windows only: window=day, week, month or year}, undef],
    ['window=month algorithm=gcra',
     qr{window=month counts calendar periods, a fixed window: algorithm "gcra" cannot}, undef])
{
    my ($params, $re, $dir) = @$case;
    $cfg->write_conf(<<"EOF");
ratelimit_redis 127.0.0.1:$REDIS_PORT;
ratelimit_zone z key=\$http_x_api_key limit=5 $params;
server { listen 127.0.0.1:%%PORT%%; location / { ratelimit zone=z; } }
EOF
    local $ENV{TZDIR} = $dir if defined $dir;
    my ($status, $out) = $cfg->nginx_t;
    my $line = $cfg->conf_line(qr/ratelimit_zone z /);
    ok($status != 0 && $out =~ $re && $out =~ /nginx\.conf:$line\b/,
        "nginx -t refuses $params with file and line")
        or diag($out);
}

done_testing();
