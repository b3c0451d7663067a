package RateLimitTest::Clock;

# A test's wall clock: the file the clock shim (t/lib/clock_shim.c, built as
# build/clock_shim.so) maps into every process started on it.  The file
# holds the offset from the real time in nanoseconds and its complement,
# two 64-bit integers in the machine's byte order, rewritten in place with
# one write: a change reaches the running processes at once.  Monotonic
# clocks are not moved (nginx's timers, Redis's).
#
#   my $clock = RateLimitTest::Clock->new($dir);   offset 0: the real time
#   %ENV = (%ENV, $clock->env);      a process started so runs on it
#   $clock->set($epoch);             it reads $epoch now, and goes on
#   $clock->now;                     the time it reads (epoch seconds)

use strict;
use warnings;

use Fcntl qw(O_RDWR O_CREAT);
use Time::HiRes qw(time);
use RateLimitTest::Env qw(clock_shim);

sub new {
    my ($class, $dir) = @_;
    my $path = "$dir/clock";
    sysopen(my $fh, $path, O_RDWR | O_CREAT, 0644) or die "open $path: $!";
    my $self = bless { path => $path, fh => $fh, offset => 0 }, $class;
    $self->_write(0);
    return $self;
}

sub path { $_[0]{path} }

# The environment that starts a process on this clock: the shim preloaded
# after any other preload (a sanitizer's runtime must come first).
sub env {
    my ($self) = @_;
    my $shim = clock_shim();
    die "clock shim not found at $shim (./build.sh builds it, or set "
        . "RATELIMIT_CLOCK_SHIM)\n" unless -f $shim;
    return (LD_PRELOAD => join(':', grep { defined && length }
                $ENV{LD_PRELOAD}, $shim),
            RATELIMIT_CLOCK_FILE => $self->{path});
}

# From now on the clock reads $epoch (seconds, fractional) and goes on as
# the real time does.
sub set {
    my ($self, $epoch) = @_;
    $self->_write(int(($epoch - time) * 1e9));
}

# The time the clock reads now, epoch seconds.
sub now { time + $_[0]{offset} / 1e9 }

# The offset, ns, and its complement in one write of 16 bytes at the start
# of the file.
sub _write {
    my ($self, $ns) = @_;
    my $pair = do { use integer; pack('q q', $ns, ~$ns) };
    sysseek($self->{fh}, 0, 0) or die "seek $self->{path}: $!";
    my $n = syswrite($self->{fh}, $pair);
    die "write $self->{path}: " . ($! || "short write") . "\n"
        unless defined $n && $n == length $pair;
    $self->{offset} = $ns;
}

1;
