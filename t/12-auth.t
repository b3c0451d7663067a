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
use IO::Socket::INET;
use IO::Select;
use POSIX ();
use Time::HiRes qw(time sleep);
use RateLimitTest;

RateLimitTest::require_module();

my $WORKERS = 2;
my $t = RateLimitTest->new(workers => $WORKERS);

# ---------------------------------------------------------------------------
# helpers (local to this file)

sub hdr { RateLimitTest::header(@_) }

# One HTTP/1.0 request on a fresh connection; never waits more than $timeout.
# Returns { status, headers => {lc name => value}, body, elapsed, err }.
sub raw_get {
    my ($port, $path, $h, $timeout) = @_;
    $timeout //= 5;
    my $t0 = time;
    my %res = (status => 0, headers => {}, body => '', err => '');
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
        Proto => 'tcp', Timeout => $timeout);
    if (!$s) { $res{err} = "connect: $!"; $res{elapsed} = time - $t0; return \%res }
    binmode $s;
    my $req = "GET $path HTTP/1.0\r\nHost: localhost\r\n";
    $req .= "$_: $h->{$_}\r\n" for sort keys %{ $h // {} };
    $req .= "\r\n";
    my $off = 0;
    while ($off < length $req) {
        my $n = syswrite($s, $req, length($req) - $off, $off);
        if (!defined $n) { $res{err} = "write: $!"; last }
        $off += $n;
    }
    my $buf = '';
    my $sel = IO::Select->new($s);
    while (!$res{err}) {
        my $left = $t0 + $timeout - time;
        if ($left <= 0 || !$sel->can_read($left)) { $res{err} = 'timeout'; last }
        my $n = sysread($s, my $chunk, 65536);
        if (!defined $n) { $res{err} = "read: $!"; last }
        last if $n == 0;
        $buf .= $chunk;
    }
    close $s;
    $res{elapsed} = time - $t0;
    my ($head, $body) = split /\r\n\r\n/, $buf, 2;
    $res{body} = $body // '';
    if (defined $head && $head =~ m{^HTTP/\d\.\d (\d{3})}) {
        $res{status} = $1;
        for my $l (split /\r\n/, $head) {
            $res{headers}{ lc $1 } = $2 if $l =~ /^([^:]+):\s*(.*)$/;
        }
    } elsif (!$res{err}) {
        $res{err} = 'no HTTP response';
    }
    return \%res;
}

sub rhdr { $_[0]{headers}{ lc $_[1] } }

# Forked load generator.  Each client loops until $stop_file exists (or the
# hard deadline / request cap), one request at a time, and writes one line per
# request: "start end status rs location err".
sub start_load {
    my (%o) = @_;
    my @pids;
    my $port = $t->port('PORT');
    for my $c (0 .. $o{clients} - 1) {
        my $pid = fork;
        die "fork: $!" unless defined $pid;
        if ($pid == 0) {
            my $file = $t->tmp . "/load.$c";
            open my $fh, '>', $file or POSIX::_exit(1);
            my $old = select $fh; $| = 1; select $old;
            my $deadline = time + $o{max_seconds};
            for my $i (1 .. $o{max_requests}) {
                last if -e $o{stop_file} || time > $deadline;
                my ($loc, $key) = $o{pick}->($c, $i);
                my $t0 = time;
                my $r = raw_get($port, "/$loc/index.html", { 'X-Api-Key' => $key }, 5);
                my $err = $r->{err}; $err =~ s/\s+/_/g;
                printf {$fh} "%.4f %.4f %d %s %s %s\n", $t0, time, $r->{status},
                    (rhdr($r, 'X-RL-Status') // '-'), $loc, ($err eq '' ? '-' : $err);
                sleep $o{pause} if $o{pause};
            }
            close $fh;
            POSIX::_exit(0);
        }
        $RateLimitTest::CHILDREN{$pid} = 'load client';
        push @pids, [$pid, $c];
    }
    return \@pids;
}

sub finish_load {
    my ($pids) = @_;
    my @rec;
    for my $p (@$pids) {
        my ($pid, $c) = @$p;
        my $deadline = time + 15;
        while (waitpid($pid, POSIX::WNOHANG()) == 0) {
            if (time > $deadline) { kill 'KILL', $pid; waitpid($pid, 0); last }
            sleep 0.05;
        }
        delete $RateLimitTest::CHILDREN{$pid};
        open my $fh, '<', $t->tmp . "/load.$c" or next;
        while (<$fh>) {
            chomp;
            my ($t0, $t1, $st, $rs, $loc, $err) = split / /;
            push @rec, { t0 => $t0, t1 => $t1, el => $t1 - $t0, status => $st, rs => $rs,
                loc => $loc, err => $err };
        }
    }
    return @rec;
}

# Redis-problem log lines ("ratelimit: ..." at warn/error) per worker pid per
# second: at most one (the spec's throttle).
sub throttle_ok {
    my ($name) = @_;
    my %n;
    for my $l (split /\n/, $t->error_log) {
        next unless $l =~ m{^(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) \[(?:warn|error)\] (\d+)#\d+: (?:\*\d+ )?ratelimit: };
        $n{"$2 $1"}++;
    }
    my @over = grep { $n{$_} > 1 } sort keys %n;
    ok(!@over, $name) or diag("more than one line in one second: " . join(', ', map { "$_ => $n{$_}" } @over[0 .. ($#over < 5 ? $#over : 5)]));
}

sub final_checks {
    my @l = split /\n/, $t->error_log;
    my @crash = grep { /exited on signal/ } @l;
    ok(!@crash, 'no worker exited on a signal') or diag(join "\n", @crash);
    $t->no_alerts('no [alert] or [emerg] in error.log');
}

sub commandstat {
    my ($name) = @_;    # e.g. "script|load", "eval", "evalsha"
    my $info = $t->redis('INFO', 'commandstats');
    return 0 if RateLimitTest::is_redis_error($info);
    return $info =~ /^cmdstat_\Q$name\E:calls=(\d+)/m ? $1 : 0;
}

sub wait_passed {
    my ($loc, $key_prefix, $timeout) = @_;
    my $deadline = time + $timeout;
    my $i = 0;
    while (1) {
        my $r = raw_get($t->port('PORT'), "/$loc/index.html", { 'X-Api-Key' => $key_prefix . $i++ }, 3);
        return (time, $r) if (rhdr($r, 'X-RL-Status') // '') eq 'PASSED';
        return (undef, $r) if time > $deadline;
        sleep 0.02;
    }
}

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
    $t->write_conf(<<"EOC" . <<'EOC2');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% $params timeout=200ms connect_timeout=500ms;
EOC
ratelimit_zone api key=$http_x_api_key limit=2 window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    location /open/   { ratelimit zone=api; alias %%TMP%%/html/; }
    location /closed/ { ratelimit zone=api; ratelimit_fail closed; alias %%TMP%%/html/; }
}
EOC2
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

    my @o = map { raw_get($t->port, '/open/index.html', { 'X-Api-Key' => "o-$name" }, 5) } 1 .. 3;
    is(join(' ', map { $_->{status} . '/' . (rhdr($_, 'X-RL-Status') // '-') } @o), '200/ERROR 200/ERROR 200/ERROR',
        "$name: fail open passes with ERROR (also over the limit)");
    my $c = raw_get($t->port, '/closed/index.html', { 'X-Api-Key' => "c-$name" }, 5);
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
    throttle_ok("$name: redis problems logged at most once a second per worker");
    $t->stop_nginx;
    final_checks();
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
    is(rhdr(raw_get($t->port, '/open/index.html', { 'X-Api-Key' => 'mc' }, 5), 'X-RL-Status'), 'ERROR', 'maxclients: ERROR');
    sleep 1.5;    # backoff at its cap
    is($t->redis('CONFIG', 'SET', 'maxclients', '10000'), 'OK', 'maxclients raised');
    my $t0 = time;
    my ($when) = wait_passed('open', 'mc-', 4);
    ok(defined $when && $when - $t0 <= 2, sprintf('maxclients raised: PASSED within 2s (%.2fs)', defined $when ? $when - $t0 : 99));
    $t->stop_nginx;
    final_checks();
}

# --- right credentials: limiting works, one stable connection per worker -----
{
    conf('user=rluser password=userpw');
    unlink $t->tmp . '/error.log';
    $t->start_nginx;
    my ($when) = wait_passed('open', 'ok', 3);
    ok(defined $when, 'right credentials: PASSED');
    my @r = map { raw_get($t->port, '/open/index.html', { 'X-Api-Key' => 'good' }, 5)->{status} } 1 .. 3;
    is("@r", '200 200 429', 'right credentials: exact limit');
    my $c0 = connections_received();
    sleep 1.5;
    is(connections_received() - $c0, 0, 'right credentials: no reconnects while idle');
    $t->stop_nginx;
    final_checks();
}

# --- wrong password fixed by a reload ------------------------------------------
{
    conf('password=wrong');
    unlink $t->tmp . '/error.log';
    $t->start_nginx;
    is(rhdr(raw_get($t->port, '/open/index.html', { 'X-Api-Key' => 'rl1' }, 5), 'X-RL-Status'), 'ERROR', 'before reload: ERROR');
    conf('password=right');
    $t->reload;
    my $t0 = time;
    my ($when) = wait_passed('open', 'rl2-', 4);
    ok(defined $when, 'after reload with the right password: PASSED');
    ok(defined $when && $when - $t0 < 2, sprintf('after reload: PASSED within 2s (%.2fs)', defined $when ? $when - $t0 : 99));
    my @r = map { raw_get($t->port, '/closed/index.html', { 'X-Api-Key' => 'rl3' }, 5)->{status} } 1 .. 3;
    is("@r", '200 200 429', 'after reload: exact limit on the fail-closed location');
    $t->stop_nginx;
    final_checks();
}

$t->stop_redis;
done_testing;
