#!/usr/bin/perl
# Fault injection: the script disappears from Redis (SCRIPT FLUSH) while nginx
# runs.
#
# Expected (spec): a NOSCRIPT reply makes the module resend the script with
# EVAL once (which caches it again), so the next requests still get correct
# verdicts: the exact limit holds, for sequential and concurrent requests and
# for requests under two zones.

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

sub statuses { join ' ', map { $_->{err} || $_->{status} } @_ }
sub rems { join ' ', map { rhdr($_, 'X-RateLimit-Remaining') // '-' } @_ }
sub req { raw_get($t->port, "/$_[0]/index.html", { 'X-Api-Key' => $_[1] }, 5) }

sub noscript_errors {
    my $info = $t->redis('INFO', 'errorstats');
    return $info =~ /^errorstat_NOSCRIPT:count=(\d+)/m ? $1 : 0;
}

# ---------------------------------------------------------------------------

$t->start_redis;
$t->write_conf(<<'EOC');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=2s;
ratelimit_zone api key=$http_x_api_key limit=5 window=60s;
ratelimit_zone two key=$http_x_api_key limit=3 window=60s;
ratelimit_zone fix key=$http_x_api_key limit=4 window=60s algorithm=fixed;
server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    location /one/ { ratelimit zone=api; alias %%TMP%%/html/; }
    location /two/ { ratelimit zone=api; ratelimit zone=two; alias %%TMP%%/html/; }
    location /fix/ { ratelimit zone=fix; ratelimit_fail closed; alias %%TMP%%/html/; }
}
EOC
$t->start_nginx;
{
    my ($up) = wait_passed('one', 'warm', 3);
    ok(defined $up, 'nginx + redis up');
}
my @all;    # every response, to check that none was an ERROR

# --- sequential ----------------------------------------------------------------
{
    my @a = map { req('one', 'seq') } 1 .. 2;
    is($t->redis('SCRIPT', 'FLUSH'), 'OK', 'SCRIPT FLUSH');
    my $eval0 = commandstat('eval');
    my $ns0 = noscript_errors();
    my @b = map { req('one', 'seq') } 1 .. 5;
    push @all, @a, @b;
    is(statuses(@a, @b), '200 200 200 200 200 429 429', 'after SCRIPT FLUSH: exact limit (5)');
    is(rems(@a, @b), '4 3 2 1 0 0 0', 'after SCRIPT FLUSH: remaining continues where it was');
    is(join(' ', map { rhdr($_, 'X-RL-Status') // '-' } @b), 'PASSED PASSED PASSED REJECTED REJECTED', 'after SCRIPT FLUSH: statuses');
    is($t->redis_hash_total('rl:api:seq'), 5, 'after SCRIPT FLUSH: redis count 5');
    is(noscript_errors() - $ns0, 1, 'redis answered NOSCRIPT once');
    is(commandstat('eval') - $eval0, 1, 'the module resent the script with EVAL once; EVALSHA worked again afterwards');
    unlike($t->error_log, qr/does not have the script/, 'no "does not have the script" failure logged');
}

# --- concurrent requests in flight when the script is gone ------------------------
for my $round (1 .. 3) {
    is($t->redis('SCRIPT', 'FLUSH'), 'OK', "round $round: SCRIPT FLUSH");
    my @b = burst(12, sub { ('/one/index.html', { 'X-Api-Key' => "conc$round" }) }, 5);
    push @all, @b;
    my %n;
    $n{ $_->{err} || $_->{status} }++ for @b;
    is(($n{200} // 0) . '/' . ($n{429} // 0), '5/7', "round $round: 12 concurrent requests after SCRIPT FLUSH: exactly 5 admitted");
    my @rem = sort { $a <=> $b } map { rhdr($_, 'X-RateLimit-Remaining') } grep { $_->{status} == 200 } @b;
    is("@rem", '0 1 2 3 4', "round $round: admitted requests saw remaining 4..0 once each");
    is($t->redis_hash_total("rl:api:conc$round"), 5, "round $round: redis count 5");
}

# --- two zones in one call ------------------------------------------------------------
{
    is($t->redis('SCRIPT', 'FLUSH'), 'OK', 'two zones: SCRIPT FLUSH');
    my @r = map { req('two', 'multi') } 1 .. 4;
    push @all, @r;
    is(statuses(@r), '200 200 200 429', 'two zones after SCRIPT FLUSH: the smaller limit (3) holds');
    is($t->redis_hash_total('rl:api:multi'), 3, 'two zones: zone api counted 3');
    is($t->redis_hash_total('rl:two:multi'), 3, 'two zones: zone two counted 3');
}

# --- fixed window, fail closed: never a 503 because of the flush -----------------
{
    is($t->redis('SCRIPT', 'FLUSH'), 'OK', 'fixed window: SCRIPT FLUSH');
    my @r = map { req('fix', 'fx') } 1 .. 5;
    push @all, @r;
    is(statuses(@r), '200 200 200 200 429', 'fixed window, fail closed, after SCRIPT FLUSH: exact limit, no 503');
}

# --- flush between every request ------------------------------------------------------
{
    my @r;
    for (1 .. 7) {
        $t->redis('SCRIPT', 'FLUSH');
        push @r, req('one', 'every');
    }
    push @all, @r;
    is(statuses(@r), '200 200 200 200 200 429 429', 'SCRIPT FLUSH before every request: exact limit');
    is(rems(@r), '4 3 2 1 0 0 0', 'SCRIPT FLUSH before every request: remaining 4..0');
}

# --- FLUSHALL and SCRIPT FLUSH together: counting starts afresh ------------------------
{
    # (a subject counted but never rejected: workers may remember rejections)
    my @p = map { req('one', 'part') } 1 .. 3;
    is(statuses(@p), '200 200 200', 'subject "part" counted 3 of 5');
    is($t->redis('FLUSHALL'), 'OK', 'FLUSHALL');
    is($t->redis('SCRIPT', 'FLUSH'), 'OK', 'SCRIPT FLUSH');
    my @r = map { req('one', 'part') } 1 .. 6;
    push @all, @p, @r;
    is(statuses(@r), '200 200 200 200 200 429', 'FLUSHALL + SCRIPT FLUSH: the subject starts afresh, exact limit');
    is(rems(@r), '4 3 2 1 0 0', 'FLUSHALL + SCRIPT FLUSH: remaining 4..0');
}

my @err = grep { (rhdr($_, 'X-RL-Status') // '') eq 'ERROR' || $_->{err} } @all;
is(scalar @err, 0, 'no request got ERROR (' . scalar(@all) . ' requests)');

$t->stop_nginx;
$t->stop_redis;
final_checks();

done_testing;
