package RateLimitTest::Process;

# Processes and ports: every process started by the tests runs in its own
# process group, is registered in %CHILDREN and is killed (group-wide) by
# stop_*, an END block and INT/TERM/HUP handlers.  Free loopback ports by
# name.  Methods of RateLimitTest (it inherits them) and functions.

use strict;
use warnings;

use Fcntl qw(O_RDWR O_CREAT :flock);
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

# A free loopback port, below the kernel's ephemeral range (32768 and up by
# default), so that no outgoing connection takes it between this choice and
# the server's bind, and claimed with a lock held until this process exits,
# so that no other test running beside this one picks it too.
my $PORT_LOCKS = '/tmp/ratelimit-test-ports';
my %CLAIMED;                   # port => its lock's file handle

sub free_port {
    return claim_random(20700) // die "no free loopback port between 12000 and 32699";
}

# A named port P (as port()) whose Redis Cluster bus port, P + 10000, is
# claimed too, both below the ephemeral range.
sub cluster_port {
    my ($self, $name) = @_;
    $self->{ports}{$name} //= claim_random(10700, 10000) // die "no free port pair for $name";
}

# A port from 12000 on, of `span`, claimed (and P + `bus` too if given); undef
# after 1000 tries.
sub claim_random {
    my ($span, $bus) = @_;
    for (1 .. 1000) {
        my $p = 12000 + int(rand($span));
        return $p if claim_port($p) && (!$bus || claim_port($p + $bus));
    }
    return undef;
}

# True if $port is now this process's: bindable on 127.0.0.1 and no other
# test process holds its lock.  The lock goes with this process, however it
# ends.
sub claim_port {
    my ($p) = @_;
    return 0 if $CLAIMED{$p};
    if (!-d $PORT_LOCKS) {
        mkdir $PORT_LOCKS;
        chmod 01777, $PORT_LOCKS;
    }
    my $lock = "$PORT_LOCKS/$p";
    sysopen(my $fh, $lock, O_RDWR | O_CREAT, 0666) or die "cannot open $lock: $!";
    return 0 unless flock($fh, LOCK_EX | LOCK_NB);
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $p, Proto => 'tcp',
        Listen => 1, ReuseAddr => 1) or return 0;
    close $s;
    $CLAIMED{$p} = $fh;
    return 1;
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
