package RateLimitTest::Process;

# Processes and ports: every process started by the tests runs in its own
# process group, is registered in %CHILDREN and is killed (group-wide) by
# stop_*, an END block and INT/TERM/HUP handlers.  Free loopback ports by
# name.  Methods of RateLimitTest (it inherits them) and functions.

use strict;
use warnings;

use IO::Socket::INET;
use POSIX qw(:sys_wait_h);
use Time::HiRes qw(time sleep);
use Exporter 'import';
use RateLimitTest::Env qw(_read_file);

our @EXPORT_OK = qw(_alive _terminate _children_of free_port _port_open _kill_all);

our $OWNER_PID = $$;
our %CHILDREN;                 # pid (== pgid) => description

END {
    local $?;
    _kill_all() if $$ == $OWNER_PID;
}

for my $sig (qw(INT TERM HUP)) {
    $SIG{$sig} = sub {
        _kill_all() if $$ == $OWNER_PID;
        POSIX::_exit(1) if $$ != $OWNER_PID;
        exit 1;
    };
}

sub _kill_all {
    for my $pid (keys %CHILDREN) {
        _terminate($pid, 'TERM', 3);
    }
}

sub _spawn {
    my ($self, $desc, $outfile, @cmd) = @_;
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if ($pid == 0) {
        POSIX::setpgid(0, 0);
        open STDIN, '<', '/dev/null';
        open STDOUT, '>>', $outfile or POSIX::_exit(126);
        open STDERR, '>&', \*STDOUT or POSIX::_exit(126);
        no warnings q(exec);
        exec { $cmd[0] } @cmd;
        POSIX::_exit(127);
    }
    POSIX::setpgid($pid, $pid);    # avoid the race with the child's own setpgid
    $CHILDREN{$pid} = $desc;
    return $pid;
}

sub _alive {
    my ($pid) = @_;
    my $r = waitpid($pid, WNOHANG);
    if ($r == $pid || $r == -1) {
        delete $CHILDREN{$pid};
        return 0;
    }
    return 1;
}

# Signal the process, wait for it, then SIGKILL its whole process group.
# Returns true if the process exited by itself within $timeout seconds.
sub _terminate {
    my ($pid, $sig, $timeout) = @_;
    return 1 unless $CHILDREN{$pid};
    kill $sig, $pid;
    my $deadline = time + $timeout;
    my $exited = 0;
    while (time < $deadline) {
        # /proc state 'Z' means it exited but is not reaped yet: the group id
        # cannot be reused, so killing the group is safe.
        my $st = _read_file("/proc/$pid/stat");
        if (!$st || $st =~ /^\d+ \(.*\) Z/s) { $exited = 1; last }
        sleep 0.02;
    }
    kill 'KILL', -$pid;    # leftovers (e.g. workers) in the process group
    kill 'KILL', $pid;
    waitpid($pid, 0);
    delete $CHILDREN{$pid};
    return $exited;
}

# Pids of the direct children of $pid (e.g. the nginx workers of a master).
sub _children_of {
    my ($ppid) = @_;
    my @kids;
    opendir my $d, '/proc' or return ();
    for my $p (grep { /^\d+$/ } readdir $d) {
        my $st = _read_file("/proc/$p/stat");
        push @kids, $p if $st =~ /^\d+ \(.*\) \S (\d+) /s && $1 == $ppid;
    }
    closedir $d;
    return sort { $a <=> $b } @kids;
}

sub free_port {
    my $s = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp', Listen => 1, ReuseAddr => 1,
    ) or die "cannot bind a free port: $!";
    my $p = $s->sockport;
    close $s;
    return $p;
}

# Named loopback ports, allocated lazily: port() / port('PORT2') / port('REDIS_PORT') ...
sub port {
    my ($self, $name) = @_;
    $name //= 'PORT';
    $self->{ports}{$name} //= do {
        my $p;
        my %used = map { $_ => 1 } grep { defined } values %{ $self->{ports} };
        do { $p = free_port() } while $used{$p};
        $p;
    };
}

sub _port_open {
    my ($port) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp', Timeout => 1);
    return 0 unless $s;
    close $s;
    return 1;
}

# Stops a process started here (start_redis_server, start_child): $sig
# (default TERM), then SIGKILL of its group after $timeout (default 5) s.
# True if it exited by itself.
sub stop_process {
    my ($self, $pid, $sig, $timeout) = @_;
    return 1 unless $pid;
    return _terminate($pid, $sig // 'TERM', $timeout // 5);
}

# Runs a forked child (its own process group, registered for cleanup) that
# calls $code->() and exits.  Returns the pid.
sub start_child {
    my ($self, $desc, $code) = @_;
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if ($pid == 0) {
        POSIX::setpgid(0, 0);
        eval { $code->(); 1 } or print STDERR "$desc: $@";
        POSIX::_exit(0);
    }
    POSIX::setpgid($pid, $pid);
    $CHILDREN{$pid} = $desc;
    return $pid;
}

# redis_at({ host => '127.0.0.1', port => P, auth => [user, pw] | [pw], timeout => 2 }, @argv)

1;
