#!/usr/bin/perl
# Fault injection: Redis stalled with SIGSTOP for ~3 s.
#
# Expected (spec): requests to a limited location are answered by the fail
# policy within `timeout` (100ms here) plus a small margin; a location without
# a limit on the same single worker keeps answering fast (the worker never
# blocks on Redis); after SIGCONT the late replies are discarded without harm
# and verdicts are correct again.  Redis is always SIGCONTed in cleanup.

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

my $WORKERS = 1;
my $t = RateLimitTest->new(workers => $WORKERS);

my $STOPPED;    # pid of a SIGSTOPped redis
END { kill 'CONT', $STOPPED if $STOPPED }

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
sub sr { my $r = shift; ($r->{err} || $r->{status}) . '/' . (rhdr($r, 'X-RL-Status') // '-') }

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

# Fires $n requests at once on non-blocking sockets; returns the results
# (same shape as raw_get) in order.
sub burst {
    my ($n, $make, $timeout) = @_;
    my $port = $t->port('PORT');
    my (@c, %by_fd);
    my $sel = IO::Select->new;
    my $t0 = time;
    for my $i (0 .. $n - 1) {
        my ($path, $h) = $make->($i);
        my $req = "GET $path HTTP/1.0\r\nHost: localhost\r\n";
        $req .= "$_: $h->{$_}\r\n" for sort keys %{ $h // {} };
        $req .= "\r\n";
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp', Timeout => 5);
        my $e = { status => 0, headers => {}, body => '', err => '', buf => '', t0 => time };
        push @c, $e;
        if (!$s) { $e->{err} = "connect: $!"; next }
        binmode $s;
        $e->{s} = $s;
        $e->{out} = $req;
    }
    for my $e (@c) {    # send all requests together
        next unless $e->{s};
        $e->{t0} = time;
        my $n = syswrite($e->{s}, $e->{out});
        if (!defined $n || $n != length $e->{out}) { $e->{err} = 'short write'; close $e->{s}; delete $e->{s}; next }
        $sel->add($e->{s});
        $by_fd{ fileno $e->{s} } = $e;
    }
    my $deadline = $t0 + $timeout;
    while ($sel->count && time < $deadline) {
        for my $s ($sel->can_read($deadline - time)) {
            my $e = $by_fd{ fileno $s };
            my $n = sysread($s, my $chunk, 65536);
            if ($n) { $e->{buf} .= $chunk; next }
            $e->{err} = "read: $!" unless defined $n;
            $e->{elapsed} = time - $e->{t0};
            $sel->remove($s);
            close $s;
        }
    }
    for my $e (@c) {
        if ($e->{s} && !defined $e->{elapsed}) { $e->{err} ||= 'timeout'; $e->{elapsed} = time - $e->{t0}; close $e->{s} }
        delete $e->{s};
        my ($head, $body) = split /\r\n\r\n/, delete $e->{buf}, 2;
        $e->{body} = $body // '';
        if (defined $head && $head =~ m{^HTTP/\d\.\d (\d{3})}) {
            $e->{status} = $1;
            for my $l (split /\r\n/, $head) { $e->{headers}{ lc $1 } = $2 if $l =~ /^([^:]+):\s*(.*)$/ }
        } elsif (!$e->{err}) {
            $e->{err} = 'no HTTP response';
        }
        $e->{elapsed} //= 0;
    }
    return @c;
}

# ---------------------------------------------------------------------------

$t->start_redis;
$t->write_conf(<<'EOC');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=100ms;
ratelimit_zone api key=$http_x_api_key limit=3 window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    location /lim/    { ratelimit zone=api; alias %%TMP%%/html/; }
    location /closed/ { ratelimit zone=api; ratelimit_fail closed; alias %%TMP%%/html/; }
    location /free/   { alias %%TMP%%/html/; }
}
EOC
$t->start_nginx;

my ($first) = wait_passed('lim', 'warm', 3);
ok(defined $first, 'redis up: PASSED');
my @workers_before = sort map { $_->{pid} } $t->access_entries;

my $MARGIN = 0.5;    # generous: shared machine
my $TIMEOUT = 0.1;

# --- stall under a light sequential load ---------------------------------------
{
    my $rpid = $t->redis_pid;
    my $stop = $t->tmp . '/stop.load';
    unlink $stop;
    kill 'STOP', $rpid;
    $STOPPED = $rpid;
    my $t_stop = time;
    my $load = start_load(
        clients => 3, max_seconds => 10, max_requests => 3000, stop_file => $stop, pause => 0.01,
        pick => sub { my ($c, $i) = @_; ((qw(lim closed free))[$c], "S$c-$i") },
    );

    # a burst of concurrent requests in the middle of the stall
    sleep 1.0;
    my @b = burst(40, sub { my $i = shift; ($i % 2 ? '/closed/index.html' : '/lim/index.html', { 'X-Api-Key' => "B$i" }) }, 5);
    my @lim_b = @b[grep { $_ % 2 == 0 } 0 .. $#b];
    my @cl_b  = @b[grep { $_ % 2 == 1 } 0 .. $#b];
    is(join(',', map { $_->{err} || $_->{status} } @lim_b), join(',', (200) x @lim_b), 'stall burst: fail open 200 for all');
    is(join(',', map { $_->{err} || $_->{status} } @cl_b), join(',', (503) x @cl_b), 'stall burst: fail closed 503 for all');
    my ($bmax) = sort { $b <=> $a } map { $_->{elapsed} } @b;
    cmp_ok($bmax, '<', $TIMEOUT + $MARGIN, sprintf('stall burst: slowest answer %.3fs < timeout + margin', $bmax));
    is(join(',', map { rhdr($_, 'X-RL-Status') // '-' } @lim_b), join(',', ('ERROR') x @lim_b), 'stall burst: ERROR');

    sleep 2.0;
    open my $fh, '>', $stop or die; close $fh;
    my @rec = finish_load($load);
    kill 'CONT', $rpid;
    my $t_cont = time;
    $STOPPED = undef;
    note(sprintf 'redis stopped for %.2fs, %d requests', $t_cont - $t_stop, scalar @rec);

    my @errs = grep { $_->{err} ne '-' || !$_->{status} } @rec;
    is(scalar @errs, 0, 'stall: every request answered') or diag(join "\n", map { "$_->{loc} $_->{err}" } @errs[0 .. ($#errs < 9 ? $#errs : 9)]);

    my @lim  = grep { $_->{loc} eq 'lim' } @rec;
    my @cl   = grep { $_->{loc} eq 'closed' } @rec;
    my @free = grep { $_->{loc} eq 'free' } @rec;
    ok(@lim > 5 && @cl > 5 && @free > 20, sprintf('stall: requests made (lim %d, closed %d, free %d)', scalar @lim, scalar @cl, scalar @free));

    my @lb = grep { $_->{status} != 200 || $_->{rs} ne 'ERROR' } @lim;
    is(scalar @lb, 0, 'stall: fail open answers 200 ERROR') or diag(join ' ', map { "$_->{status}/$_->{rs}" } @lb[0 .. ($#lb < 19 ? $#lb : 19)]);
    my @cb = grep { $_->{status} != 503 || $_->{rs} ne 'ERROR' } @cl;
    is(scalar @cb, 0, 'stall: fail closed answers 503 ERROR') or diag(join ' ', map { "$_->{status}/$_->{rs}" } @cb[0 .. ($#cb < 19 ? $#cb : 19)]);

    my ($lmax) = sort { $b <=> $a } map { $_->{el} } @lim, @cl;
    cmp_ok($lmax, '<', $TIMEOUT + $MARGIN, sprintf('stall: limited requests answered within timeout + margin (slowest %.3fs)', $lmax));

    # Until Redis has been silent for 2 s, requests wait out the timeout;
    # after that the worker drops the wedged connection and reconnects, and
    # requests that come while it is down fail at once, as they should.
    my @early = grep { $_->{t0} - $t_stop < 1.5 } @lim, @cl;
    my ($lmin) = sort { $a <=> $b } map { $_->{el} } @early;
    cmp_ok($lmin // 0, '>=', $TIMEOUT * 0.8, sprintf('stall: limited requests in its first 1.5 s waited for the timeout (fastest %.3fs)', $lmin // 0));

    my ($fmax) = sort { $b <=> $a } map { $_->{el} } @free;
    my @fbad = grep { $_->{status} != 200 } @free;
    is(scalar @fbad, 0, 'stall: unlimited location answers 200');
    cmp_ok($fmax, '<', 0.25, sprintf('stall: unlimited location answers fast (slowest %.3fs): worker not blocked', $fmax));

    ok($t->wait_log(qr/ratelimit: redis timed out after 100 ms, request (?:passed|rejected)/, 1, 2),
        'error.log: "redis timed out after 100 ms, request passed/rejected"');
}

# --- after SIGCONT: late replies discarded, verdicts correct -------------------
{
    my ($when) = wait_passed('lim', 'resume', 4);
    ok(defined $when, 'after SIGCONT: PASSED again');
    my @r = map { raw_get($t->port, '/lim/index.html', { 'X-Api-Key' => 'exact' }, 5) } 1 .. 4;
    is(join(' ', map { $_->{status} } @r), '200 200 200 429', 'after SIGCONT: exact limit');
    is(join(' ', map { rhdr($_, 'X-RateLimit-Remaining') // '-' } @r), '2 1 0 0', 'after SIGCONT: remaining 2 1 0 0');
    is(join(' ', map { rhdr($_, 'X-RL-Status') // '-' } @r), 'PASSED PASSED PASSED REJECTED', 'after SIGCONT: statuses');

    # interleaved subjects on concurrent requests: each verdict is its own
    my @b = burst(30, sub { my $i = shift; ('/lim/index.html', { 'X-Api-Key' => 'mix' . ($i % 3) }) }, 5);
    my %ok;
    for my $i (0 .. $#b) { $ok{ $i % 3 }{ $b[$i]{status} }++ }
    is(join(' ', map { ($ok{$_}{200} // 0) . '/' . ($ok{$_}{429} // 0) } 0 .. 2), '3/7 3/7 3/7',
        'after SIGCONT: three subjects x 10 concurrent requests: exactly 3 passed each');
    for my $k (0 .. 2) {
        is($t->redis_hash_total("rl:api:mix$k"), 3, "after SIGCONT: redis count of mix$k is 3");
    }

    # a second, shorter stall: the link is still usable afterwards
    kill 'STOP', $t->redis_pid;
    $STOPPED = $t->redis_pid;
    my $s = raw_get($t->port, '/lim/index.html', { 'X-Api-Key' => 'exact2' }, 5);
    kill 'CONT', $t->redis_pid;
    $STOPPED = undef;
    is($s->{status} . '/' . (rhdr($s, 'X-RL-Status') // '-'), '200/ERROR', 'second stall: fail open ERROR');
    cmp_ok($s->{elapsed}, '<', $TIMEOUT + $MARGIN, 'second stall: within timeout + margin');
    sleep 0.3;
    my @r2 = map { raw_get($t->port, '/lim/index.html', { 'X-Api-Key' => 'exact2' }, 5) } 1 .. 3;
    # the stalled request was counted by redis once it resumed: 1 + 3 requests
    is(join(' ', map { $_->{status} } @r2), '200 200 429', 'second stall: the late-counted request is accounted, then exact limit');
}

# --- CLIENT PAUSE WRITE (as during a failover): the script's writes wait --------
{
    is($t->redis('CLIENT', 'PAUSE', 1500, 'WRITE'), 'OK', 'CLIENT PAUSE 1500 WRITE');
    my $t0 = time;
    my @r = map { raw_get($t->port, '/lim/index.html', { 'X-Api-Key' => "pause$_" }, 5) } 1 .. 3;
    my $c = raw_get($t->port, '/closed/index.html', { 'X-Api-Key' => 'pausec' }, 5);
    my $f = raw_get($t->port, '/free/index.html', {}, 5);
    my $paused = time - $t0 < 1.4;    # all of the above happened during the pause
    is(join(' ', map { sr($_) } @r, $c), '200/ERROR 200/ERROR 200/ERROR 503/ERROR', 'paused: fail policy');
    my ($max) = sort { $b <=> $a } map { $_->{elapsed} } @r, $c;
    cmp_ok($max, '<', $TIMEOUT + $MARGIN, sprintf('paused: answered within timeout + margin (%.3fs)', $max));
    ok($f->{status} == 200 && $f->{elapsed} < 0.25, 'paused: unlimited location fast');
    ok($paused, 'the requests above ran during the pause');

    # a connection killed with calls in flight (paused): answered at once
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t->port, Proto => 'tcp', Timeout => 5) or die;
    syswrite($s, "GET /closed/index.html HTTP/1.0\r\nX-Api-Key: killed\r\n\r\n");
    sleep 0.03;    # the call is now queued in redis, behind the pause
    my $k0 = time;
    my $n = $t->redis('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    my $buf = '';
    my $sel = IO::Select->new($s);
    while ($sel->can_read(5)) { my $got = sysread($s, my $chunk, 65536); last unless $got; $buf .= $chunk }
    close $s;
    my $k = time - $k0;
    like($buf, qr{^HTTP/1\.1 503}, "connection killed with a call in flight: fail closed 503 ($n killed)");
    cmp_ok($k, '<', $TIMEOUT + $MARGIN, sprintf('connection killed with a call in flight: answered in %.3fs', $k));

    sleep(1.6 - (time - $t0)) if time - $t0 < 1.6;    # pause over
    my ($when) = wait_passed('lim', 'unpause', 4);
    ok(defined $when, 'after the pause: PASSED again');
    my @e = map { raw_get($t->port, '/lim/index.html', { 'X-Api-Key' => 'pexact' }, 5) } 1 .. 4;
    is(join(' ', map { $_->{status} } @e), '200 200 200 429', 'after the pause: exact limit');
}

my @workers_after = sort map { $_->{pid} } $t->access_entries;
my %wp = map { $_ => 1 } @workers_after;
is(scalar keys %wp, 1, 'one worker served every request (no respawn)') or diag(join ' ', keys %wp);

throttle_ok('redis problems logged at most once a second per worker');

$t->stop_nginx;
$t->stop_redis;
final_checks();

done_testing;
