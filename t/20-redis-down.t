#!/usr/bin/perl
# Redis unavailable / slow: fail open and closed; reconnect; unix socket;
# password, ACL user, db.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use IO::Socket::INET;
use RateLimitTest qw(fail_policy_http hdr);

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 1);

sub conf {
    $t->write_conf(fail_policy_http("ratelimit_redis $_[0];", limit => 2, closed_status => 429));
}

# poll until a request on /open/ is PASSED again (redis back)
sub wait_passed {
    my ($key, $timeout) = @_;
    my $deadline = time + $timeout;
    my $r;
    while (1) {
        $r = $t->get_as('open', $key);
        return $r if (hdr($r, 'X-RL-Status') // '') eq 'PASSED';
        return $r if time > $deadline;
        sleep 0.1;
    }
}

# --- redis not running at start ------------------------------------------------

my $dead = $t->port('DEAD_PORT');    # nothing listens here
conf("127.0.0.1:$dead timeout=200ms connect_timeout=200ms");
$t->start_nginx;
ok(1, 'nginx starts with redis down');

{
    my @r = map { $t->get_as('open', 'd1') } 1 .. 3;
    is(join(' ', map { $_->{status} } @r), '200 200 200', 'fail open: requests pass (even over the limit)');
    is(join(' ', map { hdr($_, 'X-RL-Status') // '-' } @r), 'ERROR ERROR ERROR', 'fail open: $ratelimit_status ERROR');
    ok(!(grep { $_->{elapsed} > 2 } @r), 'fail open: answered quickly');
    is($r[0]{content}, "index page\n", 'fail open: content served');

    my $c = $t->get_as('closed', 'd1');
    is($c->{status}, 503, 'fail closed: 503');
    is(hdr($c, 'X-RL-Status'), 'ERROR', 'fail closed: $ratelimit_status ERROR');
    ok($c->{elapsed} < 2, 'fail closed: answered quickly');
    is(hdr($c, 'Retry-After'), '1', 'fail closed: Retry-After: 1 (the link tries again within 500 ms)');
    ok(!defined hdr($r[0], 'Retry-After'), 'fail open: no Retry-After');

    my $n = $t->get_as('closed_n', 'd1');
    is($n->{status}, 429, 'fail closed status=429: 429');
    is(hdr($n, 'Retry-After'), '1', 'fail closed status=429: Retry-After: 1');
    is(hdr($n, 'X-RL-Status'), 'ERROR', 'fail closed status=429: $ratelimit_status ERROR');

    my @e = $t->access_entries_for(sub { $_->{uri} =~ m{^/(open|closed|closed_n)/} }, 5);
    is(join(' ', map { $_->{rs} } @e), 'ERROR ERROR ERROR ERROR ERROR', 'access log: ERROR');
}

# --- redis comes up later: limiting resumes --------------------------------------

$t->start_redis(port => $dead);
{
    my $r = wait_passed('w1', 6);
    is(hdr($r, 'X-RL-Status'), 'PASSED', 'redis started later: requests PASSED again');
    my @s = map { $t->get_as('open', 'up1')->{status} } 1 .. 3;
    is("@s", '200 200 429', 'redis started later: limiting works');
    is($t->redis_window_total('rl:api:up1'), 2, 'redis started later: counted in redis');
}

# --- redis hangs (SIGSTOP): timeout applies ---------------------------------------

{
    kill 'STOP', $t->redis_pid;
    my $r = $t->get_as('open', 'h1');
    kill 'CONT', $t->redis_pid if $r->{elapsed} > 3;    # do not hang the test for long
    is($r->{status}, 200, 'redis hung: fail open 200');
    is(hdr($r, 'X-RL-Status'), 'ERROR', 'redis hung: ERROR');
    ok($r->{elapsed} >= 0.15 && $r->{elapsed} < 1.5,
        sprintf('redis hung: answered after about the timeout (%.3fs)', $r->{elapsed}));
    my $c = $t->get_as('closed', 'h1');
    is($c->{status}, 503, 'redis hung: fail closed 503');
    ok($c->{elapsed} < 1.5, sprintf('redis hung: 503 after about the timeout (%.3fs)', $c->{elapsed}));

    # clients that give up while their verdict is pending
    my @socks;
    for my $i (1 .. 5) {
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t->port('PORT'), Proto => 'tcp')
            or next;
        syswrite($s, "GET /open/index.html HTTP/1.1\r\nHost: x\r\nX-Api-Key: gone$i\r\n\r\n");
        push @socks, $s;
    }
    sleep 0.05;
    close $_ for @socks;
    sleep 0.5;
    kill 'CONT', $t->redis_pid;

    $r = wait_passed('h2', 5);
    is(hdr($r, 'X-RL-Status'), 'PASSED', 'redis resumed: PASSED again');
    # late replies to the timed-out commands must not be mixed up with new ones
    my @r = map { $t->get_as('open', 'h3') } 1 .. 3;
    is(join(' ', map { $_->{status} } @r), '200 200 429', 'redis resumed: exact limit');
    is(join(' ', map { hdr($_, 'X-RateLimit-Remaining') // '-' } @r), '1 0 0', 'redis resumed: consistent remaining');
}

ok($t->stop_nginx, 'graceful stop after redis outages');
$t->stop_redis;

# --- unix socket ------------------------------------------------------------------

$t->start_redis(unixsocket => 1);
conf('unix:' . $t->redis_socket . ' timeout=1s');
$t->start_nginx;
{
    my @r = map { $t->get_as('open', 'ux') } 1 .. 3;
    is(join(' ', map { $_->{status} } @r), '200 200 429', 'unix socket: limiting works');
    is(hdr($r[0], 'X-RL-Status'), 'PASSED', 'unix socket: PASSED');
    is($t->redis_window_total('rl:api:ux'), 2, 'unix socket: counted in redis');
}

# --- redis answers with an error (key of the wrong type) -------------------------

{
    is($t->redis('SET', 'rl:api:wrongtype', 'a string'), 'OK', 'subject key set to a string');
    my $r = $t->get_as('open', 'wrongtype');
    is($r->{status}, 200, 'redis error reply: fail open 200');
    is(hdr($r, 'X-RL-Status'), 'ERROR', 'redis error reply: ERROR');
    is($t->get_as('closed', 'wrongtype')->{status}, 503, 'redis error reply: fail closed 503');
    my @s = map { $t->get_as('open', 'fine')->{status} } 1 .. 3;
    is("@s", '200 200 429', 'other subjects unaffected');
}

# --- scripts flushed from redis --------------------------------------------------

{
    is($t->redis('SCRIPT', 'FLUSH'), 'OK', 'SCRIPT FLUSH');
    my @r = map { $t->get_as('open', 'flushed') } 1 .. 3;
    is(join(' ', map { $_->{status} } @r), '200 200 429', 'after SCRIPT FLUSH: limiting works');
    is(hdr($r[0], 'X-RL-Status'), 'PASSED', 'after SCRIPT FLUSH: PASSED');
}

$t->stop_nginx;
$t->stop_redis;

# --- password and db ---------------------------------------------------------------

$t->start_redis(requirepass => 'secret');
my $rp = $t->redis_port;
conf("127.0.0.1:$rp password=secret db=3 timeout=1s");
$t->start_nginx;
{
    my @r = map { $t->get_as('open', 'pw') } 1 .. 3;
    is(join(' ', map { $_->{status} } @r), '200 200 429', 'password + db=3: limiting works');
    is(hdr($r[0], 'X-RL-Status'), 'PASSED', 'password + db=3: PASSED');
    is($t->redis_db(3, 'EXISTS', 'rl:api:pw'), 1, 'db=3: key in db 3');
    is($t->redis_window_total('rl:api:pw', 3), 2, 'db=3: counted 2');
    is($t->redis('EXISTS', 'rl:api:pw'), 0, 'db=3: key not in db 0');
}
$t->stop_nginx;

conf("127.0.0.1:$rp password=wrong timeout=1s");
$t->start_nginx;
{
    my $r = $t->get_as('open', 'bad');
    is($r->{status}, 200, 'wrong password: fail open 200');
    is(hdr($r, 'X-RL-Status'), 'ERROR', 'wrong password: ERROR');
    is($t->get_as('closed', 'bad')->{status}, 503, 'wrong password: fail closed 503');
}
$t->stop_nginx;

# --- ACL user -----------------------------------------------------------------------

is($t->redis('ACL', 'SETUSER', 'rluser', 'on', '>userpw', '~*', '+@all'), 'OK', 'ACL user created');
conf("127.0.0.1:$rp user=rluser password=userpw timeout=1s");
$t->start_nginx;
{
    my @r = map { $t->get_as('open', 'acl') } 1 .. 3;
    is(join(' ', map { $_->{status} } @r), '200 200 429', 'user + password: limiting works');
    is(hdr($r[0], 'X-RL-Status'), 'PASSED', 'user + password: PASSED');
    is($t->redis_window_total('rl:api:acl'), 2, 'user + password: counted in db 0');
}
$t->stop_nginx;

conf("127.0.0.1:$rp user=rluser password=secret timeout=1s");
$t->start_nginx;
{
    my $r = $t->get_as('open', 'acl2');
    is(hdr($r, 'X-RL-Status'), 'ERROR', 'wrong password for user: ERROR');
}
$t->stop_nginx;

$t->no_alerts;

done_testing;
