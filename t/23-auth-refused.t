#!/usr/bin/perl
# Fault injection: Redis refuses the module's credentials or commands.
#
# Expected (spec): error.log names the cause (refused AUTH: WRONGPASS ...);
# the fail policy applies (open: 200 with $ratelimit_status ERROR, closed:
# 503); reconnects back off (50 ms doubling to 500 ms) so Redis sees only a
# few connections a second per worker, not a storm; with the right
# credentials (also after a reload) limiting works and the connection stays.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use FaultTest qw(rhdr);
use RateLimitTest qw(fail_policy_http);

RateLimitTest::require_module();

my $WORKERS = 2;
my $t = FaultTest->new(workers => $WORKERS);

# ---------------------------------------------------------------------------
# helpers (local to this file)

sub connections_received {
    my $info = $t->redis('INFO', 'stats');
    die "INFO failed: $info" if RateLimitTest::is_redis_error($info);
    my $n = $info =~ /^total_connections_received:(\d+)/m ? $1 : die "no total_connections_received";
    # connections refused at maxclients are counted apart
    $n += $1 if $info =~ /^rejected_connections:(\d+)/m;
    return $n;
}

sub conf {
    my ($params) = @_;
    $t->write_conf(fail_policy_http(
        "ratelimit_redis 127.0.0.1:%%REDIS_PORT%% $params timeout=200ms connect_timeout=500ms;",
        limit => 2));
}

# ---------------------------------------------------------------------------

$t->start_redis(requirepass => 'right');
my $RP = $t->redis_port;
is($t->redis('ACL', 'SETUSER', 'rluser', 'on', '>userpw', '~*', '+@all'), 'OK', 'ACL user rluser');
is($t->redis('ACL', 'SETUSER', 'noscript', 'on', '>nspw', '~*', '+@all', '-@scripting'), 'OK', 'ACL user without scripting');
is($t->redis('ACL', 'SETUSER', 'disabled', 'off', '>offpw', '~*', '+@all'), 'OK', 'ACL user switched off');

# refused(name, params, log regex, seconds)
sub refused {
    my ($name, $params, $log_re, $secs) = @_;
    conf($params);
    unlink $t->tmp . '/error.log';
    my $c0 = connections_received();
    my $t0 = time;
    $t->start_nginx;

    my @o = map { $t->req('open', "o-$name") } 1 .. 3;
    is(join(' ', map { $_->{status} . '/' . (rhdr($_, 'X-RL-Status') // '-') } @o), '200/ERROR 200/ERROR 200/ERROR',
        "$name: fail open passes with ERROR (also over the limit)");
    my $c = $t->req('closed', "c-$name");
    is($c->{status} . '/' . (rhdr($c, 'X-RL-Status') // '-'), '503/ERROR', "$name: fail closed 503");
    ok(!(grep { $_->{elapsed} > 1 } @o, $c), "$name: answered quickly");

    sleep($t0 + $secs - time) if $t0 + $secs > time;
    my $c1 = connections_received();
    my $el = time - $t0;
    my $n = $c1 - $c0;
    note(sprintf '%s: %d connections in %.2fs from %d workers', $name, $n, $el, $WORKERS);
    # backoff 50 ms doubling to 500 ms: about 6 attempts in 2 s per worker
    cmp_ok($n, '>=', 3 * $WORKERS, "$name: the workers keep retrying ($n connections)");
    cmp_ok($n / $el / $WORKERS, '<', 10, sprintf('%s: no reconnect storm (%.1f connections/s/worker)', $name, $n / $el / $WORKERS));

    my $log = $t->error_log;
    like($log, $log_re, "$name: error.log names the cause")
        or diag(join "\n", grep { /ratelimit/ } (split /\n/, $log)[0 .. 10]);
    my $lines = () = $log =~ /$log_re/g;
    cmp_ok($lines, '<=', ($secs + 1) * $WORKERS, "$name: cause logged at most once a second per worker ($lines lines)");
    $t->throttle_ok("$name: redis problems logged at most once a second per worker");
    $t->stop_nginx;
    $t->final_checks;
}

my $H = qr/ratelimit: redis at "127\.0\.0\.1:$RP" refused/;

refused('wrong password', 'password=wrong', qr/$H AUTH: WRONGPASS/, 3);
refused('unknown ACL user', 'user=nosuchuser password=right', qr/$H AUTH: WRONGPASS/, 2);
refused('ACL user, wrong password', 'user=rluser password=bad', qr/$H AUTH: WRONGPASS/, 2);
refused('disabled ACL user', 'user=disabled password=offpw', qr/$H AUTH: WRONGPASS/, 2);
refused('no password sent', '', qr/$H [A-Z ]+: NOAUTH/, 2);
refused('ACL user without scripting', 'user=noscript password=nspw', qr/$H SCRIPT LOAD: NOPERM/, 2);

# --- Redis at maxclients: refuses every new connection with an error -------------
{
    is($t->redis('CONFIG', 'SET', 'maxclients', '1'), 'OK', 'maxclients 1 (the test holds the only slot)');
    refused('maxclients reached', 'password=right',
        qr/ratelimit: (?:redis at "127\.0\.0\.1:$RP" refused [A-Z ]+|lost connection to redis at "127\.0\.0\.1:$RP"): ERR max number of clients reached/, 2);

    # and recovers when Redis accepts again, nginx running
    conf('password=right');
    $t->start_nginx;
    is(rhdr($t->req('open', 'mc'), 'X-RL-Status'), 'ERROR', 'maxclients: ERROR');
    sleep 1.5;    # backoff at its cap
    is($t->redis('CONFIG', 'SET', 'maxclients', '10000'), 'OK', 'maxclients raised');
    my $t0 = time;
    my ($when) = $t->wait_passed('open', 'mc-', 4);
    ok(defined $when && $when - $t0 <= 2, sprintf('maxclients raised: PASSED within 2s (%.2fs)', defined $when ? $when - $t0 : 99));
    $t->stop_nginx;
    $t->final_checks;
}

# --- right credentials: limiting works, one stable connection per worker -----
{
    conf('user=rluser password=userpw');
    unlink $t->tmp . '/error.log';
    $t->start_nginx;
    my ($when) = $t->wait_passed('open', 'ok', 3);
    ok(defined $when, 'right credentials: PASSED');
    my @r = map { $t->req('open', 'good')->{status} } 1 .. 3;
    is("@r", '200 200 429', 'right credentials: exact limit');
    my $c0 = connections_received();
    sleep 1.5;
    is(connections_received() - $c0, 0, 'right credentials: no reconnects while idle');
    $t->stop_nginx;
    $t->final_checks;
}

# --- wrong password fixed by a reload ------------------------------------------
{
    conf('password=wrong');
    unlink $t->tmp . '/error.log';
    $t->start_nginx;
    is(rhdr($t->req('open', 'rl1'), 'X-RL-Status'), 'ERROR', 'before reload: ERROR');
    conf('password=right');
    $t->reload;
    my $t0 = time;
    my ($when) = $t->wait_passed('open', 'rl2-', 4);
    ok(defined $when, 'after reload with the right password: PASSED');
    ok(defined $when && $when - $t0 < 2, sprintf('after reload: PASSED within 2s (%.2fs)', defined $when ? $when - $t0 : 99));
    my @r = map { $t->req('closed', 'rl3')->{status} } 1 .. 3;
    is("@r", '200 200 429', 'after reload: exact limit on the fail-closed location');
    $t->stop_nginx;
    $t->final_checks;
}

$t->stop_redis;
done_testing;
