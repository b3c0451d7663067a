#!/usr/bin/perl
# Fault injection: repeated configuration reloads under light load, and the
# Redis side dropping the module's connections repeatedly.
#
# Expected (spec): requests keep being answered through the reloads; old
# workers exit and close their Redis connections (Redis returns to about one
# client per worker); the workers' open file descriptors do not grow; the
# module reconnects after its connection is killed without leaking fds.

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

# Worker processes: children of the nginx master (from /proc).
sub workers {
    my $master = $t->nginx_pid or return ();
    my @w;
    opendir my $d, '/proc' or die "/proc: $!";
    for my $p (grep { /^\d+$/ } readdir $d) {
        open my $fh, '<', "/proc/$p/stat" or next;
        my $st = do { local $/; <$fh> } // '';
        push @w, $p if $st =~ /^\d+ \(.*\) (\S) (\d+) /s && $2 == $master && $1 ne 'Z';
    }
    return sort { $a <=> $b } @w;
}

sub fd_count {
    my ($pid) = @_;
    opendir my $d, "/proc/$pid/fd" or return undef;
    my $n = grep { /^\d+$/ } readdir $d;
    return $n;
}

# Redis clients other than the test's own connection.
sub module_clients {
    my $me = $t->redis('CLIENT', 'ID');
    my $list = $t->redis('CLIENT', 'LIST');
    die "CLIENT LIST failed: $list" if RateLimitTest::is_redis_error($list);
    return grep { !/\bid=$me\b/ } split /\n/, $list;
}

sub wait_clients {
    my ($want, $timeout) = @_;
    my $deadline = time + $timeout;
    my @c;
    while (1) {
        @c = module_clients();
        return @c if @c == $want || time > $deadline;
        sleep 0.1;
    }
}

sub wait_workers {
    my ($want, $timeout) = @_;
    my $deadline = time + $timeout;
    my @w;
    while (1) {
        @w = workers();
        return @w if @w == $want || time > $deadline;
        sleep 0.1;
    }
}

# ---------------------------------------------------------------------------

$t->start_redis;
$t->write_conf(<<'EOC');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=200ms;
ratelimit_zone api key=$http_x_api_key limit=3 window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    location /lim/  { ratelimit zone=api; alias %%TMP%%/html/; }
    location /free/ { alias %%TMP%%/html/; }
}
EOC
$t->start_nginx;

my ($up) = wait_passed('lim', 'warm', 3);
ok(defined $up, 'nginx + redis up');
raw_get($t->port, "/lim/index.html", { 'X-Api-Key' => "w$_" }, 3) for 1 .. 20;    # warm both workers
my @w0 = wait_workers($WORKERS, 3);
is(scalar @w0, $WORKERS, "$WORKERS workers");
my @c0 = wait_clients($WORKERS, 3);
is(scalar @c0, $WORKERS, 'redis: one connection per worker before the reloads');
sleep 0.3;
my %fd0 = map { $_ => fd_count($_) } @w0;
my ($fdmax0) = sort { $b <=> $a } values %fd0;
note('fds before: ' . join(', ', map { "$_=$fd0{$_}" } sort keys %fd0));

# --- 10 reloads under light load ----------------------------------------------
{
    my $stop = $t->tmp . '/stop.load';
    unlink $stop;
    my $load = start_load(
        clients => 2, max_seconds => 25, max_requests => 3000, stop_file => $stop, pause => 0.02,
        pick => sub { my ($c, $i) = @_; (($c ? 'free' : 'lim'), "R$c-$i") },
    );
    my $t0 = time;
    for my $i (1 .. 10) {
        $t->reload;
        sleep 0.1;
    }
    note(sprintf '10 reloads in %.1fs', time - $t0);
    sleep 0.5;
    open my $fh, '>', $stop or die; close $fh;
    my @rec = finish_load($load);
    note(scalar(@rec) . ' requests during the reloads');

    ok(@rec > 20, 'load ran during the reloads (' . scalar(@rec) . ' requests)');
    my @errs = grep { $_->{err} ne '-' || !$_->{status} } @rec;
    is(scalar @errs, 0, 'reloads: every request answered') or diag(join "\n", map { "$_->{loc} $_->{err}" } @errs[0 .. ($#errs < 9 ? $#errs : 9)]);
    my @bad = grep { $_->{status} != 200 } @rec;
    is(scalar @bad, 0, 'reloads: every request 200 (fail open / unlimited)') or diag(join ' ', map { "$_->{loc}:$_->{status}" } @bad[0 .. ($#bad < 19 ? $#bad : 19)]);
    my @slow = grep { $_->{el} > 2 } @rec;
    is(scalar @slow, 0, 'reloads: no request slower than 2s');
    my %rs;
    $rs{ $_->{rs} }++ for grep { $_->{loc} eq 'lim' } @rec;
    note('statuses on /lim/: ' . join(', ', map { "$_=$rs{$_}" } sort keys %rs));

    my @w1 = wait_workers($WORKERS, 10);
    is(scalar @w1, $WORKERS, 'old workers exited after the reloads') or diag("workers: @w1");
    my %old = map { $_ => 1 } @w0;
    ok(!(grep { $old{$_} } @w1), 'the workers are new ones');

    my @c1 = wait_clients($WORKERS, 5);
    is(scalar @c1, $WORKERS, 'redis: back to one connection per worker (old workers\' connections closed)')
        or diag(join "\n", @c1);

    my ($when) = wait_passed('lim', 'after', 3);
    ok(defined $when, 'after the reloads: PASSED');
    my @s = map { raw_get($t->port, '/lim/index.html', { 'X-Api-Key' => 'after-reload' }, 5)->{status} } 1 .. 4;
    is("@s", '200 200 200 429', 'after the reloads: exact limit');

    sleep 0.3;
    my %fd1 = map { $_ => fd_count($_) } @w1;
    note('fds after: ' . join(', ', map { "$_=" . ($fd1{$_} // '?') } sort keys %fd1));
    for my $p (sort keys %fd1) {
        ok(defined $fd1{$p} && $fd1{$p} <= $fdmax0 + 2, "worker $p: $fd1{$p} fds, not more than before ($fdmax0) + 2");
    }
    @w0 = @w1;
    %fd0 = %fd1;
}

# --- the module's connections killed from the Redis side, 8 times --------------
{
    my $kills = 0;
    for my $i (1 .. 8) {
        my $n = $t->redis('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
        $kills += $n unless RateLimitTest::is_redis_error($n);
        my @c = wait_clients($WORKERS, 3);    # reconnected
        raw_get($t->port, "/lim/index.html", { 'X-Api-Key' => "k$i-$_" }, 3) for 1 .. 4;
    }
    cmp_ok($kills, '>=', 8, "killed the module's connections ($kills kills)");
    my @c = wait_clients($WORKERS, 3);
    is(scalar @c, $WORKERS, 'after CLIENT KILL x8: one connection per worker');
    my ($when) = wait_passed('lim', 'ck', 3);
    ok(defined $when, 'after CLIENT KILL x8: PASSED');
    my @s = map { raw_get($t->port, '/lim/index.html', { 'X-Api-Key' => 'after-kill' }, 5)->{status} } 1 .. 4;
    is("@s", '200 200 200 429', 'after CLIENT KILL x8: exact limit');
    my @w = workers();
    is(join(' ', @w), join(' ', @w0), 'same workers (none crashed)');
    sleep 0.3;
    for my $p (@w) {
        my $n = fd_count($p);
        ok(defined $n && $n <= $fd0{$p} + 1, "worker $p: fds $n after reconnects, was $fd0{$p}");
    }
}

throttle_ok('redis problems logged at most once a second per worker');

$t->stop_nginx;
$t->stop_redis;
final_checks();

done_testing;
