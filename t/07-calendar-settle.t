#!/usr/bin/perl
# Calendar zones' settles that come late (issue 42): a settle goes to the
# period its request was counted in, and while Redis's clock is in that
# period it counts there, whenever it is sent; once the period has ended on
# Redis's clock it changes nothing, in no period, and never makes Redis
# refuse a call.  A zone of UTC days, limit 1000; each request reserves 40
# and its response (TokenBackend, held) says 90 used: its settle is 50.
# The clocks are driven (the clock shim: t/09) while responses are held
# and while Redis is stopped (AOF: its counts survive the restart).
#
# Expected (docs/operations.md "Calendar zones"; the (A, B) ends a call
# names: protocol/batch_protocol.hpp):
# - a response held from 01:00 to 05:00 of its day (its day the second of
#   the ends the settle names) or to 13:00 (the first): its day's count is
#   40 + 10 (another request then) + 50 = 100;
# - held from 13:00 into the next day's 02:00, or from 01:00 to the next
#   day's 13:00: the next day's count is the other request's 10 alone;
# - queued while Redis was stopped, Redis back the same day: 90 in the
#   request's day; back at 02:00 the next day: sent, nothing in any period
#   (the request's day's key gone with it); back at 13:00 the next day: the
#   periods a call names then leave the request's out, dropped unsent;
# - a server whose clock is 3 minutes ahead of Redis's, its settle queued
#   until its clock is past midnight and Redis's not yet: Redis's clock
#   chooses, 90 in the request's day; one 3 minutes behind, until Redis's
#   clock is past midnight and its own not yet: nothing counted;
# - Redis never refuses a call of theirs ("redis's clock is past the
#   calendar periods nginx sent").

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use IO::Socket::INET;
use IO::Select;
use Time::Local qw(timegm);
use RateLimitTest;
use TokenBackend;
use PromText;

RateLimitTest::require_module();

# Seconds since 1970 of a date's midnight, UTC.
sub midnight { timegm(0, 0, 0, $_[2], $_[1] - 1, $_[0]) }

my $DAY = 86400;
# nginx's clock off Redis's, s.
my $SKEW = 180;

my $t = RateLimitTest->new(workers => 1);
# A server on a clock of its own, $SKEW off Redis's.
my $off = RateLimitTest->new(workers => 1);
my @AOF = ('--appendonly', 'yes', '--appendfsync', 'always');
$t->start_redis(clock => 1, args => \@AOF);
my $RPORT = $t->redis_port;
my $BACKEND = $t->port('BACKEND');
TokenBackend::start($t, $BACKEND);

my $CONF = <<"EOF" . <<'EOF';
ratelimit_redis 127.0.0.1:$RPORT timeout=2s;
upstream model { server 127.0.0.1:$BACKEND; }
EOF
ratelimit_zone tok key=$http_x_api_key limit=1000 window=day;
server {
    listen 127.0.0.1:%%PORT%%;
    location /model/ {
        ratelimit zone=tok cost=40;
        ratelimit_settle zone=tok $upstream_http_x_usage_tokens;
        proxy_pass http://model/;
    }
    location /plain/ { ratelimit zone=tok cost=10; alias %%TMP%%/html/; }
    location = /metrics { ratelimit_metrics; }
}
EOF

for my $s ($t, $off) {
    $s->write_conf($CONF);
    $s->start_nginx(clock => 1);
}

# A request of `key` at $s's /model/, answered "90 used" after `hold` ms:
# its connection, to read the answer from (answer()).
sub ask_held {
    my ($s, $key, $hold) = @_;
    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
        PeerPort => $s->port('PORT'), Proto => 'tcp') or die "connect: $!";
    print {$c} "GET /model/x?mode=value&val=90&hold=$hold HTTP/1.1\r\n"
        . "Host: localhost\r\nX-Api-Key: $key\r\nConnection: close\r\n\r\n";
    RateLimitTest::wait_until(
        sub { TokenBackend::stats($BACKEND)->{in_flight} >= 1 }, 5);
    return $c;
}

# Whether the held response is still out (its settle not made yet).
sub still_held { TokenBackend::stats($BACKEND)->{in_flight} >= 1 }

# The status of the response on connection $c, read to its end.
sub answer {
    my ($c) = @_;
    my $sel = IO::Select->new($c);
    my $buf = '';
    while ($sel->can_read(10)) {
        sysread($c, $buf, 65536, length $buf) or last;
    }
    close $c;
    return $buf =~ m{^HTTP/\S+ (\d+)} ? $1 : 0;
}

# The settles of $s's zone tok that have ended with `outcome`, or with
# any.
sub settles_ended {
    my ($s, $outcome) = @_;
    my $m = PromText::scrape($s);
    my $n = 0;
    $n += PromText::value($m, 'nginx_ratelimit_settles_total',
                          zone => 'tok', outcome => $_)
        for $outcome // qw(applied dropped unknown failed);
    return $n;
}

# The calls Redis answered $s an error: one refused whole, as one naming
# calendar periods Redis's clock is past ("redis's clock is past the
# calendar periods nginx sent"), the requests of the call with it.
sub refusals {
    PromText::value(PromText::scrape($_[0]),
                    'nginx_ratelimit_redis_errors_total',
                    kind => 'error_reply');
}

# Waits until $s has ended `n` settles of zone tok: true if it did.
sub wait_settles {
    my ($s, $n) = @_;
    return defined RateLimitTest::wait_until(sub { settles_ended($s) >= $n },
                                             10);
}

# Redis's count of `key` as "bucket count" (a calendar zone's bucket: its
# period's end in ms less 1), or "none" without the key.
sub count_of {
    my $w = $t->redis_window("rl:tok:$_[0]");
    return defined $w->{t} ? "$w->{n} $w->{t}" : 'none';
}

# The bucket of the UTC day that ends at `end` (s).
sub day_bucket { $_[0] * 1000 - 1 }

# Stops Redis and lets $s's worker find it gone: a request of its own
# fails.
sub stop_redis_for {
    my ($s) = @_;
    $t->stop_redis;
    $s->get('/plain/index.html', { 'X-Api-Key' => 'probe' });
}

sub start_redis_again {
    $t->start_redis(port => $RPORT, clock => 1, args => \@AOF);
}

# --- held responses, one clock ------------------------------------------------

# A request at `from` (UTC) held while the clock moves to `to`, where
# another request of the key reserves 10; then the response and its settle.
# `end`: the day whose count is checked, by its end.
sub held {
    my (%c) = @_;
    my $ended = settles_ended($t);
    my $refused = refusals($t);
    $t->set_clock($c{from});
    my $c = ask_held($t, $c{key}, 1000);
    $t->set_clock($c{to});
    is($t->get('/plain/index.html', { 'X-Api-Key' => $c{key} })->{status},
       200, "$c{name}: another request then");
    ok(still_held(), "$c{name}: ... while the response is held");
    is(answer($c), 200, "$c{name}: the response");
    ok(wait_settles($t, $ended + 1), "$c{name}: its settle ended");
    is(refusals($t), $refused, "$c{name}: Redis refused no call");
    is(count_of($c{key}), day_bucket($c{end}) . " $c{count}",
       "$c{name}: Redis counts $c{count} in the day");
}

{
    my $d = midnight(2027, 3, 10);
    held(name => 'held from 01:00 to 05:00', key => 'h1',
         from => $d + 3600, to => $d + 5 * 3600,
         end => $d + $DAY, count => 100);
}
{
    my $d = midnight(2027, 3, 11);
    held(name => 'held from 01:00 to 13:00', key => 'h2',
         from => $d + 3600, to => $d + 13 * 3600,
         end => $d + $DAY, count => 100);
}
{
    my $d = midnight(2027, 3, 12);
    held(name => 'held from 13:00 to the next day\'s 02:00', key => 'h3',
         from => $d + 13 * 3600, to => $d + $DAY + 2 * 3600,
         end => $d + 2 * $DAY, count => 10);
}
{
    my $d = midnight(2027, 3, 14);
    held(name => 'held from 01:00 to the next day\'s 13:00', key => 'h4',
         from => $d + 3600, to => $d + $DAY + 13 * 3600,
         end => $d + 2 * $DAY, count => 10);
}

# --- queued while Redis is away -----------------------------------------------

# A request of `key` at `from` on server $s, its response held while Redis
# stops and $s's clock moves to `made`, when its settle is made and waits;
# then $s's clock set to `back` and Redis's to `redis` (default `back`),
# and Redis started again: the settle ends (with `outcome` if given), and
# Redis's count of the key is `count` ("bucket count" or "none").
sub queued {
    my (%c) = @_;
    my $s = $c{server} // $t;
    my $ended = settles_ended($s);
    my $ended_so = settles_ended($s, $c{outcome});
    my $refused = refusals($s);
    my $skew = ($c{redis} // $c{back}) - $c{back};
    $t->set_clock($c{from} + $skew);
    $s->set_clock($c{from});
    my $c = ask_held($s, $c{key}, 1500);
    stop_redis_for($s);
    $s->set_clock($c{made});
    ok(still_held(), "$c{name}: the response held until Redis is away");
    is(answer($c), 200, "$c{name}: the response");
    $t->set_clock($c{back} + $skew);
    $s->set_clock($c{back});
    start_redis_again();
    ok(wait_settles($s, $ended + 1), "$c{name}: its settle ended");
    is(settles_ended($s, $c{outcome}), $ended_so + 1,
       "$c{name}: ... $c{outcome}") if $c{outcome};
    is(refusals($s), $refused, "$c{name}: Redis refused no call");
    is(count_of($c{key}), $c{count}, "$c{name}: Redis counts $c{count}");
}

{
    my $d = midnight(2027, 4, 1);
    queued(name => 'queued from 02:00, Redis back at 10:00', key => 'q1',
           from => $d + 3600, made => $d + 2 * 3600, back => $d + 10 * 3600,
           count => day_bucket($d + $DAY) . ' 90');
}
# Sent (the request's day the first of the two its call names), Redis
# answers: its clock past the day, it applies nothing.
{
    my $d = midnight(2027, 4, 3);
    queued(name => 'queued from 02:00, Redis back the next day\'s 02:00',
           key => 'q2', from => $d + 3600, made => $d + 2 * 3600,
           back => $d + $DAY + 2 * 3600, count => 'none',
           outcome => 'applied');
}
# The two periods a call names at 13:00 the next day leave out the
# request's: never sent.
{
    my $d = midnight(2027, 4, 5);
    queued(name => 'queued from 14:00, Redis back the next day\'s 13:00',
           key => 'q3', from => $d + 13 * 3600, made => $d + 14 * 3600,
           back => $d + $DAY + 13 * 3600, count => 'none',
           outcome => 'dropped');
}

# --- queued, on a server whose clock is off Redis's ---------------------------

{
    my $d = midnight(2027, 5, 1);
    queued(name => "a clock ${SKEW} s ahead: its midnight, not Redis's",
           server => $off, key => 's1', from => $d + 2 * 3600,
           made => $d + 2 * 3600 + 60, back => $d + $DAY + $SKEW / 2,
           redis => $d + $DAY - $SKEW / 2,
           count => day_bucket($d + $DAY) . ' 90');
}
{
    my $d = midnight(2027, 5, 3);
    queued(name => "a clock ${SKEW} s behind: Redis's midnight, not its own",
           server => $off, key => 's2', from => $d + 2 * 3600,
           made => $d + 2 * 3600 + 60, back => $d + $DAY - $SKEW / 2,
           redis => $d + $DAY + $SKEW / 2, count => 'none',
           outcome => 'applied');
}

$_->no_alerts for $t, $off;

done_testing();
