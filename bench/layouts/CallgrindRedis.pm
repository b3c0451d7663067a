# A redis-server run under callgrind for the measurements of this folder
# (cost.pl, script_call.pl): started on a unix socket in a temporary
# folder, spoken to in RESP, its instruction counter zeroed and read.
#
#   my $r = CallgrindRedis->start('--loadmodule', $so);
#   $r->command(@argv);              # the reply: text, undef or arrays
#   $r->zero;  ...  my $ir = $r->instructions;  $r->stop;
#
# A run that dies stops its redis-server.
package CallgrindRedis;

use strict;
use warnings;

use File::Temp qw(tempdir);
use IO::Socket::UNIX;
use Time::HiRes qw(sleep);

my @running;

END {
    for my $pid (@running) {
        if (kill 0, $pid) {
            kill 'TERM', $pid;
            waitpid $pid, 0;
        }
    }
}

sub start {
    my ($class, @args) = @_;
    my $dir = tempdir('callgrind-redis-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    my $sock = "$dir/redis.sock";
    my $pid = fork // die "fork: $!\n";
    if (!$pid) {
        open STDOUT, '>', "$dir/valgrind.out";
        open STDERR, '>&', \*STDOUT;
        exec 'valgrind', '--tool=callgrind', "--callgrind-out-file=$dir/cg",
            'redis-server', '--port', '0', '--unixsocket', $sock,
            '--save', '', '--appendonly', 'no', @args;
        die "exec valgrind: $!\n";
    }
    push @running, $pid;
    my $s;
    for (1 .. 600) {
        last if $s = IO::Socket::UNIX->new(Peer => $sock);
        sleep 0.1;
    }
    die "redis-server under valgrind did not come up\n" unless $s;
    return bless { pid => $pid, dir => $dir, s => $s }, $class;
}

sub request {
    my ($self, @argv) = @_;
    my $r = '*' . @argv . "\r\n";
    $r .= '$' . length($_) . "\r\n$_\r\n" for @argv;
    return $r;
}

sub send_raw { print { $_[0]{s} } $_[1] }

# One reply: a status or integer as text, a bulk string (undef for nil),
# an array as an array reference; an error dies.
sub reply {
    my ($self) = @_;
    my $s = $self->{s};
    my $line = <$s> // die "redis closed\n";
    $line =~ s/\r\n$//;
    my $type = substr($line, 0, 1, '');
    return $line if $type eq '+' || $type eq ':';
    die "redis: $line\n" if $type eq '-';
    if ($type eq '$') {
        return undef if $line < 0;
        read($s, my $bytes, $line + 2);
        return substr($bytes, 0, $line);
    }
    return [map { $self->reply } 1 .. $line] if $type eq '*';
    die "not RESP: $type$line\n";
}

sub command {
    my ($self, @argv) = @_;
    $self->send_raw($self->request(@argv));
    return $self->reply;
}

sub zero {
    my ($self) = @_;
    system("callgrind_control -z $self->{pid} >/dev/null 2>&1") == 0
        or die "callgrind zero\n";
}

# Redis's instructions since zero(), all of its threads.
sub instructions {
    my ($self) = @_;
    system("callgrind_control -d $self->{pid} >/dev/null 2>&1") == 0
        or die "callgrind dump\n";
    my ($dump) = grep { !/\/cg$/ } glob("$self->{dir}/cg.*");
    my ($total) = `callgrind_annotate $dump`
        =~ /^\s*([\d,]+)\s.*PROGRAM TOTALS/m;
    $total =~ tr/,//d;
    return $total;
}

sub stop {
    my ($self) = @_;
    $self->send_raw($self->request('SHUTDOWN', 'NOSAVE'));
    waitpid $self->{pid}, 0;
    @running = grep { $_ != $self->{pid} } @running;
}

1;
