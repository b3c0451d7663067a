package HoldBackend;

# A small HTTP backend (core Perl, one process, select loop) that holds each
# request for a given time and records, per key, the most requests it had
# in flight at once and the order in which they arrived.
#
#   my $port = $t->port('BACKEND');
#   my $pid  = HoldBackend::start($t, $port[, keep_alive => 1]);
#   GET /anything?key=K&seq=N&hold=MS   answered 200 "ok N" after MS ms
#   HoldBackend::stats($port, 'K')      { max => N, order => [seq...],
#                                         count => N, in_flight => N }
#   HoldBackend::reset($port)           forgets every key
#   HoldBackend::events($port, 'K')     [[arrive|leave, time, seq], ...]
#
# Requests are answered with Connection: close, unless keep_alive is set:
# then an HTTP/1.1 request without "Connection: close" leaves its
# connection open for the next one (one at a time: requests sent before the
# answer to the last are not read).  The process is a child of the test's
# harness (start_child), killed with it.

use strict;
use warnings;
use IO::Socket::INET;
use IO::Select;
use Time::HiRes qw(time);

sub start {
    my ($t, $port, %o) = @_;
    my $listen = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port,
        Listen => 1024, ReuseAddr => 1, Proto => 'tcp') or die "backend listen: $!";
    my $pid = $t->start_child('hold backend', sub { serve($listen, $o{keep_alive}) });
    close $listen;
    return $pid;
}

sub serve {
    my ($listen, $keep_alive) = @_;
    $listen->blocking(0);
    my $sel = IO::Select->new($listen);
    my (%buf, %due, %keys, %conn_key);    # by fileno / socket
    my %sock;
    while (1) {
        my $now = time;
        my $next = 0.05;
        for my $fd (keys %due) {
            my $d = $due{$fd}[0] - $now;
            $next = $d if $d < $next;
        }
        $next = 0 if $next < 0;
        for my $s ($sel->can_read($next)) {
            if ($s == $listen) {
                while (my $c = $listen->accept) {
                    $c->blocking(0);
                    $sel->add($c);
                    $sock{fileno $c} = $c;
                    $buf{fileno $c} = '';
                }
                next;
            }
            my $fd = fileno $s;
            my $n = sysread($s, my $chunk, 8192);
            if (!$n) {
                # Client gone: a held request leaves the backend.
                if (my $d = delete $due{$fd}) { $keys{$d->[1]}{in_flight}-- }
                $sel->remove($s);
                delete $sock{$fd};
                delete $buf{$fd};
                close $s;
                next;
            }
            $buf{$fd} .= $chunk;
            next if $due{$fd} || $buf{$fd} !~ /\r\n\r\n/;
            my ($target, $version) = $buf{$fd} =~ m{^\w+ (\S+) HTTP/(\S+)};
            my $keep = $keep_alive && ($version // '') eq '1.1'
                && $buf{$fd} !~ /^Connection:\s*close/mi;
            my %q = map { split /=/, $_, 2 } grep { /=/ } split /[&?]/, ($target =~ /\?(.*)/ ? $1 : '');
            if ($target =~ m{^/stats}) {
                my $k = $keys{ $q{key} // '' } // {};
                my $body = sprintf "max=%d count=%d in_flight=%d order=%s\n", $k->{max} // 0,
                    $k->{count} // 0, $k->{in_flight} // 0, join(',', @{ $k->{order} // [] });
                _answer($s, $body);
                next;
            }
            if ($target =~ m{^/events}) {
                my $ev = $keys{ $q{key} // '' }{events} // [];
                _answer($s, join('', map { "@$_\n" } @$ev));
                next;
            }
            if ($target =~ m{^/reset}) {
                %keys = ();
                _answer($s, "reset\n");
                next;
            }
            my $key = $q{key} // '';
            my $k = $keys{$key} //= { max => 0, in_flight => 0, count => 0, order => [] };
            $k->{in_flight}++;
            $k->{count}++;
            $k->{max} = $k->{in_flight} if $k->{in_flight} > $k->{max};
            push @{ $k->{order} }, $q{seq} // '';
            push @{ $k->{events} }, [ 'arrive', time, $q{seq} // '' ];
            $due{$fd} = [ time + ($q{hold} // 0) / 1000, $key, $q{seq} // '', $keep ];
        }
        $now = time;
        for my $fd (keys %due) {
            next if $due{$fd}[0] > $now;
            my $d = delete $due{$fd};
            $keys{$d->[1]}{in_flight}--;
            push @{ $keys{$d->[1]}{events} }, [ 'leave', time, $d->[2] ];
            next if !$sock{$fd};
            _answer($sock{$fd}, "ok $d->[2]\n", $d->[3]);
            $buf{$fd} = '' if $d->[3];
        }
    }
}

sub _answer {
    my ($s, $body, $keep) = @_;
    my $msg = "HTTP/1.1 200 OK\r\nContent-Length: " . length($body)
        . ($keep ? '' : "\r\nConnection: close") . "\r\n\r\n$body";
    $s->blocking(1);
    syswrite $s, $msg;
    $s->blocking(0);
    shutdown $s, 1 if !$keep;
}

sub _get {
    my ($port, $target) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp')
        or die "backend: $!";
    print $s "GET $target HTTP/1.0\r\n\r\n";
    local $/;
    my $r = <$s>;
    close $s;
    return $r;
}

sub stats {
    my ($port, $key) = @_;
    my $r = _get($port, "/stats?key=$key");
    my %st = $r =~ /(\w+)=(\S*)/g;
    $st{order} = [ grep { length } split /,/, ($st{order} // '') ];
    return \%st;
}

sub reset { _get($_[0], '/reset') }

sub events {
    my ($port, $key) = @_;
    my ($body) = _get($port, "/events?key=$key") =~ /\r\n\r\n(.*)/s;
    return [ map { [ split / / ] } split /\n/, $body // '' ];
}

1;
