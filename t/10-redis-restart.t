#!/usr/bin/perl
# Fault injection: Redis not running at start and started later; Redis killed
# (SIGKILL) under concurrent load and restarted empty on the same port.
#
# Expected (spec): fail open passes everything (2xx), fail closed answers 503
# during the outage, no request waits much longer than `timeout`, no worker
# crash, reconnect with backoff capped at 500 ms so limiting resumes within
# about a second, the script is loaded again (SCRIPT LOAD) into the empty
# Redis, and Redis problems are logged at most once a second per worker.

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

# ---------------------------------------------------------------------------

my $RPORT = $t->redis_port;    # allocated now, nothing listens yet

$t->write_conf(<<'EOF');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=100ms connect_timeout=200ms;
ratelimit_zone api key=$http_x_api_key limit=3 window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    location /open/   { ratelimit zone=api; alias %%TMP%%/html/; }
    location /closed/ { ratelimit zone=api; ratelimit_fail closed; alias %%TMP%%/html/; }
    location /free/   { alias %%TMP%%/html/; }
}
EOF

# --- 1. Redis not running at start, started later ----------------------------

$t->start_nginx;
{
    my @r = map { raw_get($t->port, '/open/index.html', { 'X-Api-Key' => 'down' }, 5) } 1 .. 4;
    is(join(' ', map { $_->{status} } @r), '200 200 200 200', 'redis down at start: fail open passes all (over the limit too)');
    is(join(' ', map { rhdr($_, 'X-RL-Status') // '-' } @r), 'ERROR ERROR ERROR ERROR', 'redis down at start: status ERROR');
    my $c = raw_get($t->port, '/closed/index.html', { 'X-Api-Key' => 'down' }, 5);
    is($c->{status}, 503, 'redis down at start: fail closed 503');
    ok(!(grep { $_->{elapsed} > 1 } @r, $c), 'redis down at start: answered at once');

    ok($t->wait_log(qr/ratelimit: cannot connect to redis at "127\.0\.0\.1:$RPORT": Connection refused/, 1, 3),
        'error.log: cannot connect ... Connection refused');

    sleep 1.6;    # let the backoff reach its cap
    $t->start_redis(port => $RPORT);
    my $up = time;
    my ($when, $r) = wait_passed('open', 'later', 4);
    ok(defined $when, 'redis started later: requests PASSED again') or diag("last status: " . (rhdr($r, 'X-RL-Status') // $r->{err}));
    my $delay = defined $when ? $when - $up : 99;
    ok($delay <= 2.0, sprintf('redis started later: limiting resumed after %.2fs (<= 2s)', $delay));
    note(sprintf 'resumed after %.3fs', $delay);

    my @s = map { raw_get($t->port, '/open/index.html', { 'X-Api-Key' => 'later-limit' }, 5) } 1 .. 4;
    is(join(' ', map { $_->{status} } @s), '200 200 200 429', 'redis started later: exact limit');
    is(join(' ', map { rhdr($_, 'X-RateLimit-Remaining') // '-' } @s), '2 1 0 0', 'redis started later: remaining');
    is($t->redis_hash_total('rl:api:later-limit'), 3, 'redis started later: counted in redis');
}

# --- 2. SIGKILL under load, restart empty on the same port -------------------

{
    # the first requests after the restart above may still be settling
    my (undef) = wait_passed('closed', 'warm', 3);
    my $stop = $t->tmp . '/stop.load';
    unlink $stop;
    my $load = start_load(
        clients => 4, max_seconds => 14, max_requests => 4000, stop_file => $stop, pause => 0.005,
        pick => sub { my ($c, $i) = @_; (($c % 2 ? 'closed' : 'open'), "L$c-$i") },
    );
    sleep 1.0;
    my $rpid = $t->redis_pid;
    my $t_kill = time;
    kill 'KILL', $rpid;
    $t->stop_redis;    # reaps the killed process
    ok(!kill(0, $rpid), 'redis killed');

    # outage: probe the closed location from here as well
    sleep 0.3;
    my @probe = map { my $r = raw_get($t->port, '/closed/index.html', { 'X-Api-Key' => "probe$_" }, 5); sleep 0.1; $r } 1 .. 5;
    is(join(' ', map { $_->{status} } @probe), '503 503 503 503 503', 'outage: fail closed answers 503');
    my @po = map { raw_get($t->port, '/open/index.html', { 'X-Api-Key' => "probeo$_" }, 5) } 1 .. 3;
    is(join(' ', map { $_->{status} . '/' . (rhdr($_, 'X-RL-Status') // '-') } @po), '200/ERROR 200/ERROR 200/ERROR',
        'outage: fail open answers 200 with ERROR');
    my $free = raw_get($t->port, '/free/index.html', {}, 5);
    ok($free->{status} == 200 && $free->{elapsed} < 0.5, 'outage: unlimited location fine');
    sleep 0.6;

    $t->start_redis(port => $RPORT);    # empty: no keys, no scripts
    my $t_up = time;
    is($t->redis('DBSIZE'), 0, 'restarted redis is empty');
    my ($when, $r) = wait_passed('open', 'back', 4);
    ok(defined $when, 'after restart: PASSED again');
    my $delay = defined $when ? $when - $t_up : 99;
    ok($delay <= 2.0, sprintf('after restart: limiting resumed after %.2fs (<= 2s)', $delay));
    note(sprintf 'resumed after %.3fs', $delay);

    sleep 2.5;
    open my $fh, '>', $stop or die; close $fh;
    my @rec = finish_load($load);
    note(scalar(@rec) . ' load requests');
    ok(@rec > 100, 'load produced requests (' . scalar(@rec) . ')');

    my @errs = grep { $_->{err} ne '-' || !$_->{status} } @rec;
    is(scalar @errs, 0, 'load: every request answered') or diag(join "\n", map { "$_->{loc} $_->{err} el=$_->{el}" } @errs[0 .. ($#errs < 9 ? $#errs : 9)]);
    my @slow = sort { $b->{el} <=> $a->{el} } grep { $_->{el} > 1.0 } @rec;
    is(scalar @slow, 0, 'load: no request took longer than 1s (timeout=100ms)')
        or diag(join "\n", map { sprintf '%s %s %.3fs at +%.2fs', $_->{loc}, $_->{status}, $_->{el}, $_->{t0} - $t_kill } @slow[0 .. ($#slow < 9 ? $#slow : 9)]);
    my ($max) = sort { $b <=> $a } map { $_->{el} } @rec;
    note(sprintf 'slowest request: %.3fs', $max // 0);

    my @open = grep { $_->{loc} eq 'open' } @rec;
    my @open_bad = grep { $_->{status} !~ /^2/ } @open;
    is(scalar @open_bad, 0, 'fail open: every request 2xx (' . scalar(@open) . ' requests)')
        or diag(join ' ', map { "$_->{status}/$_->{rs}" } @open_bad[0 .. ($#open_bad < 19 ? $#open_bad : 19)]);

    my @closed = grep { $_->{loc} eq 'closed' } @rec;
    my @before = grep { $_->{t1} < $t_kill } @closed;
    my @during = grep { $_->{t0} > $t_kill + 0.2 && $_->{t1} < $t_up } @closed;
    my @after  = grep { $_->{t0} > $when + 0.2 } @closed if defined $when;
    ok(@before > 5 && !(grep { $_->{status} != 200 || $_->{rs} ne 'PASSED' } @before),
        'fail closed, before the kill: 200 PASSED (' . scalar(@before) . ')');
    ok(@during > 5 && !(grep { $_->{status} != 503 || $_->{rs} ne 'ERROR' } @during),
        'fail closed, during the outage: 503 ERROR (' . scalar(@during) . ')')
        or diag(join ' ', map { "$_->{status}/$_->{rs}" } @during);
    ok(@after && !(grep { $_->{status} != 200 || $_->{rs} ne 'PASSED' } @after),
        'fail closed, after the restart: 200 PASSED (' . scalar(@after // ()) . ')')
        or diag(join ' ', map { "$_->{status}/$_->{rs}" } grep { $_->{status} != 200 } @after);

    # limiting works on the restarted (empty) Redis: script loaded again
    my @s = map { raw_get($t->port, '/open/index.html', { 'X-Api-Key' => 'after-kill' }, 5) } 1 .. 5;
    is(join(' ', map { $_->{status} } @s), '200 200 200 429 429', 'after restart: exact limit');
    is(join(' ', map { rhdr($_, 'X-RL-Status') // '-' } @s), 'PASSED PASSED PASSED REJECTED REJECTED', 'after restart: statuses');
    is($t->redis_hash_total('rl:api:after-kill'), 3, 'after restart: counted in the new redis');
    ok(defined rhdr($s[3], 'Retry-After') && defined rhdr($s[3], 'RateLimit'), 'after restart: 429 carries the headers');

    my $deadline = time + 3;
    my $loads;
    while (($loads = commandstat('script|load')) < $WORKERS && time < $deadline) { sleep 0.1 }
    cmp_ok($loads, '>=', $WORKERS, "SCRIPT LOAD sent again by every worker on reconnect ($loads)");
    note('EVAL fallbacks on the new redis: ' . commandstat('eval'));

    like(substr($t->error_log, 0), qr/ratelimit: (?:lost connection to redis|cannot connect to redis|redis is not connected|redis connection failed)/,
        'error.log names the redis outage');
}

throttle_ok('redis problems logged at most once a second per worker');

$t->stop_nginx;
$t->stop_redis;
final_checks();

done_testing;
