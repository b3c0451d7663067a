#!/usr/bin/perl
# A host name as the Redis address: re-resolved on each reconnect through
# nginx's `resolver` (a tiny DNS server of the test's own, TinyDNS), or
# resolved once at start when no resolver is configured.
#
# Two Redis servers listen on the same port, one on 127.0.0.1 and one on
# 127.0.0.2; redis.test points at the first, then at the second.
#
# Expected (spec): with `resolver`, the name is looked up through it (no
# need for it to resolve at configuration time); an established connection
# is kept when the answer changes; after the connection is lost, the worker
# resolves the name again and its counts land on the new address; a name that
# no longer resolves gives the fail policy and a log line, and recovery when
# it resolves again.  Without `resolver`, the name is resolved once, at start
# (the system's resolver): a name it cannot resolve fails `nginx -t`, and
# reconnects go to the same address.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use FaultTest qw(rhdr sr);
use RateLimitTest qw(fail_policy_http);
use TinyDNS;

RateLimitTest::require_module();

my $WORKERS = 2;
my $LIMIT = 3;
my $t = FaultTest->new(workers => $WORKERS);
my $P = $t->redis_port;

$t->start_redis(port => $P);    # 127.0.0.1:P, the harness's own client talks to it
my $two = { host => '127.0.0.2', port => $P };
$t->start_redis_server(name => 'redis-two', bind => '127.0.0.2', port => $P);
my $dns = TinyDNS->start($t, records => { 'redis.test' => '127.0.0.1' }, ttl => 1);
my $DP = $dns->port;

is(join(',', TinyDNS::query($DP, 'redis.test')), '127.0.0.1', 'the test DNS server answers redis.test A 127.0.0.1');
is(RateLimitTest::redis_at($two, 'PING'), 'PONG', 'the second redis answers on 127.0.0.2:P');
$dns->set('redis.test', '127.0.0.1');    # the self-check above is not counted below
my $q0 = $dns->queries('redis.test', 'A');

sub conf {
    my ($http) = @_;
    $t->write_conf(fail_policy_http($http, limit => $LIMIT));
}

sub count_one { $t->redis_window_total("rl:api:$_[0]") // 0 }
sub count_two {
    my $w = RateLimitTest::read_window(sub { RateLimitTest::redis_at($two, @_) }, "rl:api:$_[0]");
    return RateLimitTest::is_redis_error($w) ? 0 : RateLimitTest::bucket_sum($w);
}

# $LIMIT + 2 concurrent requests for one key: "passed/rejected/other"
sub hammer {
    my ($key) = @_;
    return $t->hammer([$t], $LIMIT + 2, '/closed/index.html', { 'X-Api-Key' => $key });
}
my $EXACT = "$LIMIT/2/0";

# Changes the answer for $NAME, then waits until nginx's cached answer (valid=1s,
# kept to the end of the next whole second: nginx's clock has 1 s steps) expired.
sub switch_dns {
    my ($name, $addr) = @_;
    defined $addr ? $dns->set($name, $addr) : $dns->remove($name);
    my $last = $dns->last_query($name) // time;
    my $until = int($last) + 2 + 0.1;
    sleep($until - time) if $until > time;
}

# drop the module's connections to one redis (the test's own is kept)
sub kill_clients {
    my ($where) = @_;
    my $r = $where eq 'one'
        ? $t->redis('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
        : RateLimitTest::redis_at($two, 'CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    return ref $r ? 0 : $r;
}

sub wait_passed_on {
    my ($where, $tag, $secs) = @_;
    my $deadline = time + $secs;
    my $i = 0;
    while (time < $deadline) {
        my $key = "$tag-" . $i++;
        my $r = $t->req('open', $key, 3);
        if ((rhdr($r, 'X-RL-Status') // '') eq 'PASSED') {
            return time if ($where eq 'one' ? count_one($key) : count_two($key)) == 1;
        }
        sleep 0.05;
    }
    return undef;
}

# --- with a resolver -------------------------------------------------------------

conf(<<"EOC");
resolver 127.0.0.1:$DP valid=1s;
ratelimit_redis redis.test:$P timeout=200ms connect_timeout=300ms;
EOC
my ($st, $out) = $t->nginx_t;
is($st, 0, 'with resolver: nginx -t passes (redis.test, known to the resolver only, need not resolve at configuration time)')
    or diag($out);
# The rest needs a name nginx starts with.  If redis.test cannot be, the same
# is done with "localhost": the system resolves it (/etc/hosts) at
# configuration time, nginx's resolver (the test DNS server) afterwards.
my $NAME = $st == 0 ? 'redis.test' : 'localhost';
note("re-resolution tested with the name $NAME");
$dns->set($NAME, '127.0.0.1');
$q0 = $dns->queries($NAME, 'A');
conf(<<"EOC");
resolver 127.0.0.1:$DP valid=1s;
ratelimit_redis $NAME:$P timeout=200ms connect_timeout=300ms;
EOC
($st, $out) = $t->nginx_t;
is($st, 0, "with resolver: nginx -t passes ($NAME)") or diag($out);
$t->start_nginx;
ok(wait_passed_on('one', 'up', 5), 'with resolver: PASSED, counted on 127.0.0.1');
note(($dns->queries($NAME, 'A') - $q0) . " A queries for $NAME at start");
$t->burst(8, sub { ('/open/index.html', { 'X-Api-Key' => "w$_[0]" }) }, 3);    # both workers connected
is(hammer('k1'), $EXACT, 'with resolver: exact limit');
is(count_one('k1') . '/' . count_two('k1'), "$LIMIT/0", 'with resolver: counted on 127.0.0.1 only');

# the answer changes; established connections stay where they are
switch_dns($NAME, '127.0.0.2');
is(join(',', TinyDNS::query($DP, $NAME)), '127.0.0.2', 'the DNS answer is now 127.0.0.2');
is(hammer('k2'), $EXACT, 'answer changed, connections kept: exact limit');
is(count_one('k2') . '/' . count_two('k2'), "$LIMIT/0", 'answer changed, connections kept: still counted on 127.0.0.1');

# the connections are lost: the workers resolve again and go to 127.0.0.2
{
    my $q1 = $dns->queries($NAME, 'A');
    my $n = kill_clients('one');
    cmp_ok($n, '>=', 1, "killed the module's connections to 127.0.0.1 ($n)");
    my $t0 = time;
    my $when = wait_passed_on('two', 'sw', 4);
    ok(defined $when, sprintf('after the reconnect: counted on 127.0.0.2 (%.2fs)', ($when // time) - $t0));
    $t->burst(8, sub { ('/open/index.html', { 'X-Api-Key' => "w2$_[0]" }) }, 3);
    sleep 0.3;
    is(hammer('k3'), $EXACT, 'after the reconnect: exact limit');
    is(count_one('k3') . '/' . count_two('k3'), "0/$LIMIT", 'after the reconnect: counted on 127.0.0.2 only (both workers)');
    cmp_ok($dns->queries($NAME, 'A'), '>', $q1, 'the reconnect asked the resolver again');
    my @c1 = $t->redis_clients;
    is(scalar @c1, 0, 'no module connection left on 127.0.0.1') or diag(join "\n", @c1);
}

# and back, the other way round
{
    switch_dns($NAME, '127.0.0.1');
    kill_clients('two');
    my $when = wait_passed_on('one', 'back', 4);
    ok(defined $when, 'answer back to 127.0.0.1, connections to 127.0.0.2 lost: counted on 127.0.0.1');
    $t->burst(8, sub { ('/open/index.html', { 'X-Api-Key' => "w3$_[0]" }) }, 3);
    sleep 0.3;
    is(hammer('k4'), $EXACT, 'back on 127.0.0.1: exact limit');
    is(count_one('k4') . '/' . count_two('k4'), "$LIMIT/0", 'back on 127.0.0.1: counted there only');
}

{
    my @bogus = grep { /ratelimit: cannot resolve/ } split /\n/, $t->error_log;
    is(scalar @bogus, 0, 'no "cannot resolve" line while the DNS server answers at once (resolver_timeout left at its default)')
        or diag(join "\n", @bogus);
}

# the name stops resolving (NXDOMAIN): fail policy and a log line; it comes back
{
    my $log_from = length $t->error_log;
    switch_dns($NAME, undef);
    is(join(',', TinyDNS::query($DP, $NAME)), 'NXDOMAIN', "$NAME is now NXDOMAIN");
    kill_clients('one');
    kill_clients('two');
    sleep 0.2;
    my @r = map { $t->req('closed', "nx$_") } 1 .. 3;
    is(join(' ', map { sr($_) } @r), '503/ERROR 503/ERROR 503/ERROR', 'NXDOMAIN: fail closed 503 ERROR');
    ok((!grep { $_->{elapsed} > 0.2 + 0.5 } @r), 'NXDOMAIN: answered within timeout + margin');
    my $re = qr/ratelimit: (?=[^\n]*\Q$NAME\E)[^\n]*(?:not found|NXDOMAIN|does not exist)/i;
    my $deadline = time + 3;    # the lost connection may have used this second's log line
    sleep 0.05 while substr($t->error_log, $log_from) !~ $re && time < $deadline;
    like(substr($t->error_log, $log_from), $re, "NXDOMAIN: error.log says $NAME was not found")
        or diag(join "\n", grep { /ratelimit/ } split /\n/, substr($t->error_log, $log_from));
    $dns->set($NAME, '127.0.0.2');
    my $t0 = time;
    my $when = wait_passed_on('two', 'nxback', 4);
    ok(defined $when && $when - $t0 <= 2.5, sprintf('resolving again: counted on 127.0.0.2 after %.2fs', ($when // time) - $t0));
}

$t->throttle_ok('redis problems logged at most once a second per worker');
$t->stop_nginx;
$t->final_checks('with resolver: no [alert] or [emerg]');

# --- without a resolver: resolved once, at start -----------------------------------

rename $t->tmp . '/error.log', $t->tmp . '/error-with-resolver.log';
conf("ratelimit_redis redis.test:$P timeout=200ms;\n");
($st, $out) = $t->nginx_t;
isnt($st, 0, 'without resolver: redis.test (not known to the system) fails nginx -t');
like($out, qr/redis\.test/, 'without resolver: ... naming the host') or diag($out);

my $q2 = $dns->queries('redis.test') + $dns->queries('localhost');
conf("ratelimit_redis localhost:$P timeout=200ms connect_timeout=300ms;\n");
($st, $out) = $t->nginx_t;
is($st, 0, 'without resolver: localhost:P passes nginx -t') or diag($out);
$t->start_nginx;
ok(wait_passed_on('one', 'lh', 4), 'without resolver: localhost -> counted on 127.0.0.1');
kill_clients('one');
ok(wait_passed_on('one', 'lh2', 4), 'without resolver: after a reconnect, the same address');
$t->burst(8, sub { ('/open/index.html', { 'X-Api-Key' => "w4$_[0]" }) }, 3);
is(hammer('k5'), $EXACT, 'without resolver: exact limit');
is($dns->queries('redis.test') + $dns->queries('localhost'), $q2, 'without resolver: the test DNS server was not asked');
$t->stop_nginx;
$t->final_checks('without resolver: no [alert] or [emerg]');

$dns->stop;
done_testing;
