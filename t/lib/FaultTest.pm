package FaultTest;

# Helpers shared by the fault-injection and bad-input tests (t/1*.t): a
# RateLimitTest harness plus raw HTTP requests with a hard time limit, forked
# load generators and checks of error.log.
#
#   use FaultTest qw(raw_get rhdr sr);
#   my $t = FaultTest->new(workers => 2);      # a RateLimitTest
#   my ($when, $r) = $t->wait_passed('lim', 'warm', 3);
#
# Functions (exported on request):
#   raw_get($port, $path, \%headers, $timeout)  one HTTP/1.0 request, fresh connection
#   parse_response($buf)     { status (0 if none), headers => {lc name}, body }
#   rhdr($r, $name)          a header of a raw_get result
#   sr($r)                   "status/X-RL-Status" ("err/..." when it failed)
#   statuses(@r), rems(@r)   statuses / X-RateLimit-Remaining, space separated
# Methods (besides RateLimitTest's):
#   req($loc, $key[, $timeout])   GET /$loc/index.html with X-Api-Key: $key
#   wait_passed($loc, $key_prefix, $timeout)  (time, $r) once PASSED, else (undef, $r)
#   burst($n, $make, $timeout[, $gap])  $n requests sent at once, or $gap s apart
#   hammer(\@servers, $n, $path, \%headers)  $n at once, dealt over servers: tally
#   tally(@responses)             "passed/rejected/other" (function)
#   exact_each(\@servers, \@subjects, $limit, $extra, $path, $name)
#                                 test: each subject hammered, exactly $limit passed
#   start_load(%o) / finish_load($load)      forked sequential clients
#   commandstat($name)            calls of a Redis command (INFO commandstats)
#   served_pids                   distinct worker pids in the access log
#   live_workers, fd_count($pid)  worker pids (not zombies) of this nginx; open fds
#   redis_clients                 CLIENT LIST lines of Redis, the test's own excluded
#   throttle_ok($name[, $except]) test: log throttle held
#   final_checks([$alerts_name])  tests: no crashed worker, no [alert]/[emerg]
#   stop_and_check($label)        tests: throttle held; nginx stopped; final_checks

use strict;
use warnings;

use Test::More ();
use IO::Socket::INET;
use IO::Select;
use POSIX ();
use Time::HiRes qw(time sleep);
use Exporter 'import';
use RateLimitTest;

our @ISA = ('RateLimitTest');
our @EXPORT_OK = qw(raw_get parse_response rhdr sr statuses rems tally);

# ---------------------------------------------------------------------------
# raw HTTP

# Headers are a hash of name => value, or an array of "Name: value" lines
# sent exactly as written (name case, empty values, any bytes).
sub _request_text {
    my ($path, $h) = @_;
    my @lines = ref $h eq 'ARRAY' ? @$h
              : map { "$_: $h->{$_}" } sort keys %{ $h // {} };
    return join("\r\n", "GET $path HTTP/1.0", 'Host: localhost', @lines, '', '');
}

# Status, lower-cased headers and body of a response read to the end; status
# stays 0 when $buf holds no status line.
sub parse_response {
    my ($buf) = @_;
    my ($head, $body) = split /\r\n\r\n/, $buf, 2;
    my %r = (status => 0, headers => {}, body => $body // '');
    if (defined $head && $head =~ m{^HTTP/\d\.\d (\d{3})}) {
        $r{status} = $1;
        for my $l (split /\r\n/, $head) {
            $r{headers}{ lc $1 } = $2 if $l =~ /^([^:]+):\s*(.*)$/;
        }
    }
    return \%r;
}

# Fills status, headers and body of $res from $buf; a missing status line is
# an error unless there is one already.
sub _take_response {
    my ($res, $buf) = @_;
    my $p = parse_response($buf);
    @$res{qw(status headers body)} = @$p{qw(status headers body)};
    $res->{err} = 'no HTTP response' if !$res->{status} && !$res->{err};
}

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
    my $req = _request_text($path, $h);
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
    _take_response(\%res, $buf);
    return \%res;
}

sub rhdr { $_[0]{headers}{ lc $_[1] } }
sub sr { my $r = shift; ($r->{err} || $r->{status}) . '/' . (rhdr($r, 'X-RL-Status') // '-') }
sub statuses { join ' ', map { $_->{err} || $_->{status} } @_ }
sub rems { join ' ', map { rhdr($_, 'X-RateLimit-Remaining') // '-' } @_ }

# GET /$loc/index.html as subject $key.
sub req {
    my ($self, $loc, $key, $timeout) = @_;
    return raw_get($self->port('PORT'), "/$loc/index.html", { 'X-Api-Key' => $key }, $timeout // 5);
}

# Requests with fresh subjects until one is PASSED (Redis reachable and the
# script loaded): (time, response), or (undef, last response) after $timeout.
sub wait_passed {
    my ($self, $loc, $key_prefix, $timeout) = @_;
    my $deadline = time + $timeout;
    my $i = 0;
    while (1) {
        my $r = $self->req($loc, $key_prefix . $i++, 3);
        return (time, $r) if (rhdr($r, 'X-RL-Status') // '') eq 'PASSED';
        return (undef, $r) if time > $deadline;
        sleep 0.02;
    }
}

# Fires $n requests at once on non-blocking sockets; returns the results
# (same shape as raw_get) in order.  $make->($i) gives ($path, \%headers).
# or ($path, \%headers, $port) to send that one to another server.
sub burst {
    my ($self, $n, $make, $timeout, $gap) = @_;
    my $port = $self->port('PORT');
    my (@c, %by_fd);
    my $sel = IO::Select->new;
    my $t0 = time;
    for my $i (0 .. $n - 1) {
        my ($path, $h, $to_port) = $make->($i);    # a third value: another server's port
        my $req = _request_text($path, $h);
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $to_port // $port, Proto => 'tcp', Timeout => 5);
        my $e = { status => 0, headers => {}, body => '', err => '', buf => '', t0 => time };
        push @c, $e;
        if (!$s) { $e->{err} = "connect: $!"; next }
        binmode $s;
        $e->{s} = $s;
        $e->{out} = $req;
    }
    for my $e (@c) {    # send all requests together, or spaced
        next unless $e->{s};
        sleep $gap if $gap && $e != $c[0];
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
        _take_response($e, delete $e->{buf});
        $e->{elapsed} //= 0;
    }
    return @c;
}

# "P/R/O": how many responses passed (200, X-RL-Status PASSED), were
# rejected (429), or anything else.
sub tally {
    my %c = (p => 0, r => 0, o => 0);
    for (@_) {
        my $k = $_->{status} == 200 && (rhdr($_, 'X-RL-Status') // '') eq 'PASSED' ? 'p'
              : $_->{status} == 429 ? 'r' : 'o';
        $c{$k}++;
    }
    return "$c{p}/$c{r}/$c{o}";
}

# $n identical requests at once, dealt in turn over the servers (FaultTest
# objects) in @$servers; their tally.
sub hammer {
    my ($self, $servers, $n, $path, $h) = @_;
    return tally($self->burst($n, sub { ($path, $h, $servers->[ $_[0] % @$servers ]->port('PORT')) }, 5));
}

# Test: every subject (X-Api-Key) sent $limit + $extra times, all at once
# (25 subjects a burst), dealt over the servers: exactly $limit passed each.
sub exact_each {
    my ($self, $servers, $subjects, $limit, $extra, $path, $name) = @_;
    my %by;
    for (my $s0 = 0; $s0 < @$subjects; $s0 += 25) {
        my @subj = @$subjects[$s0 .. ($s0 + 24 < $#$subjects ? $s0 + 24 : $#$subjects)];
        my @r = $self->burst(@subj * ($limit + $extra), sub {
            my $i = shift;
            ($path, { 'X-Api-Key' => $subj[$i % @subj] }, $servers->[ int($i / @subj) % @$servers ]->port('PORT'));
        }, 10);
        push @{ $by{ $subj[$_ % @subj] } }, $r[$_] for 0 .. $#r;
    }
    my @inexact = grep { tally(@{ $by{$_} }) ne "$limit/$extra/0" } @$subjects;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    Test::More::is(scalar @inexact, 0, $name)
        or Test::More::diag(join ', ', map { "$_: " . tally(@{ $by{$_} }) } @inexact[0 .. ($#inexact < 9 ? $#inexact : 9)]);
}

# ---------------------------------------------------------------------------
# load

# Forked load generator.  Each client loops until finish_load (or the hard
# deadline / request cap), one request at a time, and writes one line per
# request: "start end status rs nginx-time location err".
#   clients, max_seconds, max_requests, pause (s between requests),
#   pick => sub { my ($client, $i) = @_; return ($location, $key) }
sub start_load {
    my ($self, %o) = @_;
    my $stop = $self->tmp . '/stop.load';    # its existence stops the clients
    unlink $stop;
    my @pids;
    for my $c (0 .. $o{clients} - 1) {
        my $pid = fork;
        die "fork: $!" unless defined $pid;
        if ($pid == 0) {
            my $file = $self->tmp . "/load.$c";
            open my $fh, '>', $file or POSIX::_exit(1);
            my $old = select $fh; $| = 1; select $old;
            my $deadline = time + $o{max_seconds};
            for my $i (1 .. $o{max_requests}) {
                last if -e $stop || time > $deadline;
                my ($loc, $key) = $o{pick}->($c, $i);
                my $t0 = time;
                my $r = $self->req($loc, $key);
                my $err = $r->{err}; $err =~ s/\s+/_/g;
                printf {$fh} "%.4f %.4f %d %s %s %s %s\n", $t0, time, $r->{status},
                    (rhdr($r, 'X-RL-Status') // '-'), (rhdr($r, 'X-RL-Time') // '-'), $loc,
                    ($err eq '' ? '-' : $err);
                sleep $o{pause} if $o{pause};
            }
            close $fh;
            POSIX::_exit(0);
        }
        $RateLimitTest::CHILDREN{$pid} = 'load client';
        push @pids, [$pid, $c];
    }
    return { stop => $stop, pids => \@pids };
}

# Stops the clients of start_load and waits for them; returns one record per
# request: { t0, t1, el, status, rs, nt, loc, err }: el the client's time
# from connecting to the response's end, nt nginx's ($request_time, when a
# response carried it: fail_policy_server), both in seconds.
sub finish_load {
    my ($self, $load) = @_;
    open my $fh, '>', $load->{stop} or die "$load->{stop}: $!";
    close $fh;
    my @rec;
    for my $p (@{ $load->{pids} }) {
        my ($pid, $c) = @$p;
        my $deadline = time + 15;
        while (waitpid($pid, POSIX::WNOHANG()) == 0) {
            if (time > $deadline) { kill 'KILL', $pid; waitpid($pid, 0); last }
            sleep 0.05;
        }
        delete $RateLimitTest::CHILDREN{$pid};
        open my $fh, '<', $self->tmp . "/load.$c" or next;
        while (<$fh>) {
            chomp;
            my ($t0, $t1, $st, $rs, $nt, $loc, $err) = split / /;
            push @rec, { t0 => $t0, t1 => $t1, el => $t1 - $t0, status => $st, rs => $rs,
                nt => ($nt eq '-' ? undef : $nt), loc => $loc, err => $err };
        }
    }
    return @rec;
}

# ---------------------------------------------------------------------------
# state of Redis and nginx

sub commandstat {
    my ($self, $name) = @_;    # e.g. "script|load", "eval", "evalsha"
    my $info = $self->redis('INFO', 'commandstats');
    return 0 if RateLimitTest::is_redis_error($info);
    return $info =~ /^cmdstat_\Q$name\E:calls=(\d+)/m ? $1 : 0;
}

# Worker pids that served the requests in the access log, sorted: one pid
# means no worker crashed and was respawned.
sub served_pids {
    my ($self) = @_;
    my %p = map { $_->{pid} => 1 } $self->access_entries;
    return sort keys %p;
}

# ---------------------------------------------------------------------------
# checks of error.log

# Redis-problem log lines ("ratelimit: ..." at warn/error) per worker pid per
# second: at most one (the spec's throttle).  Lines matching $except (e.g.
# the one line a sentinel switch owes) are not counted.
sub throttle_ok {
    my ($self, $name, $except) = @_;
    my %n;
    for my $l (split /\n/, $self->error_log) {
        next unless $l =~ m{^(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) \[(?:warn|error)\] (\d+)#\d+: (?:\*\d+ )?ratelimit: };
        next if $except && $l =~ $except;
        # The local breaker's turns have their own limit: once a second
        # each way (docs/operations.md, "Fail local").
        next if $l =~ /ratelimit: redis (?:cannot be reached, deciding|answers again, handing) /;
        $n{"$2 $1"}++;
    }
    my @over = grep { $n{$_} > 1 } sort keys %n;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    Test::More::ok(!@over, $name)
        or Test::More::diag("more than one line in one second: " . join(', ', map { "$_ => $n{$_}" } @over[0 .. ($#over < 5 ? $#over : 5)]));
}

# Two tests at the end of a file: no worker crashed, no [alert] / [emerg].
sub final_checks {
    my ($self, $alerts_name) = @_;
    my @l = split /\n/, $self->error_log;
    my @crash = grep { /exited on signal/ } @l;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    Test::More::ok(!@crash, 'no worker exited on a signal') or Test::More::diag(join "\n", @crash);
    $self->no_alerts($alerts_name // 'no [alert] or [emerg] in error.log');
}

# The tests at the end of a server's run, each named after $label: the log
# throttle held, then nginx is stopped and final_checks run.
sub stop_and_check {
    my ($self, $label) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    $self->throttle_ok("$label: redis problems logged at most once a second per worker");
    $self->stop_nginx;
    $self->final_checks("$label: no [alert] or [emerg]");
}

# ---------------------------------------------------------------------------
# processes and connections

# Worker processes of this nginx (children of its master, zombies left out).
sub live_workers {
    my ($self) = @_;
    my $master = $self->nginx_pid or return ();
    my @w;
    opendir my $d, '/proc' or die "/proc: $!";
    for my $p (grep { /^\d+$/ } readdir $d) {
        open my $fh, '<', "/proc/$p/stat" or next;
        my $st = do { local $/; <$fh> } // '';
        push @w, $p if $st =~ /^\d+ \(.*\) (\S) (\d+) /s && $2 == $master && $1 ne 'Z';
    }
    closedir $d;
    return sort { $a <=> $b } @w;
}

# Number of open file descriptors of a process (undef if it is gone).
sub fd_count {
    my ($self, $pid) = @_;
    opendir my $d, "/proc/$pid/fd" or return undef;
    my $n = grep { /^\d+$/ } readdir $d;
    closedir $d;
    return $n;
}

# CLIENT LIST of the harness's Redis, one line per client, without the
# test's own connection.
sub redis_clients {
    my ($self) = @_;
    my $me = $self->redis('CLIENT', 'ID');
    my $list = $self->redis('CLIENT', 'LIST');
    die "CLIENT LIST failed: $list" if RateLimitTest::is_redis_error($list);
    return grep { !/\bid=$me\b/ } split /\n/, $list;
}

1;
