package HostileNode;

# A fake Redis Cluster node that lies: it answers CLUSTER SLOTS with a map
# naming itself for every slot (or, in mode "huge", with an absurd number of
# ranges), and every other command but AUTH and SELECT with
# "-MOVED SLOT 127.0.0.1:PORT", PORT a new one each time, on which it
# listens too, so that whoever follows the redirect connects and is sent on
# again.  One forked process (own process group, killed with the test's
# others), one select loop.
#
#   my $n = HostileNode->start($t, $port);   # $t: a RateLimitTest
#   $n->mode('huge', 100000);                # CLUSTER SLOTS: 100000 ranges,
#                                            # each of all 16384 slots
#   $n->mode('names', $port);                # one range, of 127.0.0.1:$port
#   $n->mode('self');                        # back to the one honest range
#   my $s = $n->stats;                       # { accepts, open, listeners,
#                                            #   moved, slots }
#   $n->stop;
#
# Only the newest kListeners redirect ports stay open: a redirect to an
# older one is refused.  Stats are written every 0.2 s.

use strict;
use warnings;
use IO::Socket::INET;
use IO::Select;
use POSIX ();
use Time::HiRes qw(time);
use ClusterTest ();
use RateLimitTest::Env qw(_read_file _write_file);

my $kListeners = 64;

sub start {
    my ($class, $t, $port) = @_;
    my $self = bless { t => $t, port => $port,
        mode_file => $t->tmp . "/hostile.$port.mode",
        stats_file => $t->tmp . "/hostile.$port.stats" }, $class;
    $self->mode('self');
    my $l = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port,
        Proto => 'tcp', Listen => 128, ReuseAddr => 1)
        or die "hostile node: bind $port: $!";
    $self->{pid} = $t->start_child("hostile node $port", sub { $self->_serve($l) });
    close $l;
    return $self;
}

sub port { $_[0]{port} }

sub mode {
    my ($self, $mode, $arg) = @_;
    _write_file("$self->{mode_file}.tmp", join ' ', $mode, $arg // 0);
    rename "$self->{mode_file}.tmp", $self->{mode_file} or die "rename: $!";
}

sub stats {
    my ($self) = @_;
    my %s = _read_file($self->{stats_file}) =~ /(\w+)=(\d+)/g;
    return \%s;
}

sub stop {
    my ($self) = @_;
    $self->{t}->stop_process(delete $self->{pid}) if $self->{pid};
}

# ---------------------------------------------------------------------------
# the child

sub _parse_cmd {
    my ($buf) = @_;
    return undef unless $$buf =~ /^\*(\d+)\r\n/;
    my $pos = length("*$1\r\n");
    my @argv;
    for (1 .. $1) {
        return undef unless substr($$buf, $pos, 32) =~ /^\$(\d+)\r\n/;
        my ($len, $hl) = ($1, length("\$$1\r\n"));
        return undef if length($$buf) < $pos + $hl + $len + 2;
        push @argv, substr($$buf, $pos + $hl, $len);
        $pos += $hl + $len + 2;
    }
    substr($$buf, 0, $pos, '');
    return \@argv;
}

sub _node { "*2\r\n\$9\r\n127.0.0.1\r\n:$_[0]\r\n" }

sub _slots_reply {
    my ($self, $mode, $ranges) = @_;
    return "*1\r\n*3\r\n:0\r\n:16383\r\n" . _node($ranges) if $mode eq 'names';
    return "*1\r\n*3\r\n:0\r\n:16383\r\n" . _node($self->{port}) if $mode ne 'huge';
    return $self->{huge}{$ranges} //=
        "*$ranges\r\n" . ("*3\r\n:0\r\n:16383\r\n" . _node($self->{port})) x $ranges;
}

sub _serve {
    my ($self, $seed) = @_;
    $SIG{PIPE} = 'IGNORE';
    $SIG{TERM} = sub { POSIX::_exit(0) };
    my $sel = IO::Select->new($seed);
    my (%listener, @recent, %buf);
    my %st = (accepts => 0, open => 0, listeners => 0, moved => 0, slots => 0);
    $listener{ fileno $seed } = $seed;
    my ($next_stats, $deadline) = (0, time + 600);
    while (time < $deadline && getppid() != 1) {
        for my $s ($sel->can_read(0.1)) {
            next unless defined fileno $s;    # closed in this round
            if ($listener{ fileno $s }) {
                my $c = $s->accept or next;
                binmode $c;
                $sel->add($c);
                $buf{ fileno $c } = '';
                $st{accepts}++;
                next;
            }
            my $n = sysread($s, my $chunk, 65536);
            if (!$n) { $sel->remove($s); delete $buf{ fileno $s }; close $s; next }
            $buf{ fileno $s } .= $chunk;
            my $out = '';
            while (my $argv = _parse_cmd(\$buf{ fileno $s })) {
                my $cmd = uc $argv->[0];
                if ($cmd eq 'AUTH' || $cmd eq 'SELECT') { $out .= "+OK\r\n"; next }
                if ($cmd eq 'CLUSTER') {
                    my ($mode, $ranges) = split ' ', _read_file($self->{mode_file});
                    $out .= $self->_slots_reply($mode, $ranges);
                    $st{slots}++;
                    next;
                }
                # the key's slot when the command names one (EVALSHA sha N key)
                my $slot = @$argv > 3 && $argv->[2] =~ /^[1-9]/ ? ClusterTest::keyslot($argv->[3]) : 0;
                my $l = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0,
                    Proto => 'tcp', Listen => 8, ReuseAddr => 1);
                if (!$l) { $out .= "-ERR no port\r\n"; next }
                $listener{ fileno $l } = $l;
                $sel->add($l);
                push @recent, $l;
                if (@recent > $kListeners) {
                    my $old = shift @recent;
                    $sel->remove($old);
                    delete $listener{ fileno $old };
                    close $old;
                }
                $st{listeners}++;
                $st{moved}++;
                $out .= "-MOVED $slot 127.0.0.1:" . $l->sockport . "\r\n";
            }
            if (length $out) {
                my $off = 0;
                while ($off < length $out) {
                    my $w = syswrite($s, $out, length($out) - $off, $off);
                    last unless $w;
                    $off += $w;
                }
            }
        }
        if (time >= $next_stats) {
            $st{open} = $sel->count - keys %listener;
            _write_file("$self->{stats_file}.tmp", join(' ', map { "$_=$st{$_}" } sort keys %st) . "\n");
            rename "$self->{stats_file}.tmp", $self->{stats_file};
            $next_stats = time + 0.2;
        }
    }
}

1;
