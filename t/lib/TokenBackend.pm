package TokenBackend;

# A stand-in for an LLM API (core Perl, one process, select loop): it
# answers each request with a random token count, as a response header or
# in a chunked trailer, after holding it for a while, and can fail.
#
#   my $port = $t->port('BACKEND');
#   my $pid  = TokenBackend::start($t, $port, seed => $seed);
#   GET /anything?lo=A&hi=B&hold=MS&mode=M&status=S&val=V
#     the token count N is random in [lo, hi] (default 1..100), drawn from
#     the seeded generator in the order requests arrive;
#     mode=header  (default) "X-Usage-Tokens: N", body "tokens=N\n"
#     mode=trailer chunked ("Trailer: X-Usage-Tokens"): the head at once,
#                  the body in three chunks over `hold` ms (streamed), the
#                  last one holding "tokens=N\n", then the trailer
#                  "X-Usage-Tokens: N"
#     mode=fail    the connection closed after `hold` ms, no response
#                  (nginx answers 502, $upstream_http_x_usage_tokens empty)
#     mode=none    200 without X-Usage-Tokens
#     mode=value   "X-Usage-Tokens: V" (V from val=, URI-decoded), body "tokens=V\n"
#     status=S     the response status (default 200)
#   TokenBackend::stats($port)   { in_flight => N, served => N, failed => N }
#
# Every response closes its connection.  The process is a child of the
# test's harness (start_child), killed with it.

use strict;
use warnings;
use IO::Socket::INET;
use IO::Select;
use Time::HiRes qw(time);

sub start {
    my ($t, $port, %o) = @_;
    my $listen = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port,
        Listen => 1024, ReuseAddr => 1, Proto => 'tcp') or die "token backend listen: $!";
    my $seed = $o{seed} // 1;
    my $pid = $t->start_child('token backend', sub { srand($seed); serve($listen) });
    close $listen;
    return $pid;
}

my %REASON = (200 => 'OK', 401 => 'Unauthorized', 403 => 'Forbidden', 404 => 'Not Found',
    500 => 'Internal Server Error', 503 => 'Service Unavailable');

sub _unescape {
    my ($s) = @_;
    $s =~ tr/+/ /;
    $s =~ s/%([0-9A-Fa-f]{2})/chr hex $1/ge;
    return $s;
}

sub serve {
    my ($listen) = @_;
    local $SIG{PIPE} = 'IGNORE';
    $listen->blocking(0);
    my $sel = IO::Select->new($listen);
    my (%buf, %sock, %plan);    # by fileno; plan: [[time, bytes | undef (close)], ...]
    my %st = (in_flight => 0, served => 0, failed => 0);
    while (1) {
        my $next = 0.05;
        my $now = time;
        for my $fd (keys %plan) {
            my $d = $plan{$fd}[0][0] - $now;
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
                $st{in_flight}-- if delete $plan{$fd};
                $sel->remove($s);
                delete $sock{$fd};
                delete $buf{$fd};
                close $s;
                next;
            }
            $buf{$fd} .= $chunk;
            next if $plan{$fd} || $buf{$fd} !~ /\r\n\r\n/;
            my ($target) = $buf{$fd} =~ m{^\w+ (\S+) HTTP/};
            $target //= '/';
            my %q = map { my ($k, $v) = split /=/, $_, 2; ($k => _unescape($v // '')) }
                grep { length } split /&/, ($target =~ /\?(.*)/ ? $1 : '');
            my $t0 = time;
            if ($target =~ m{^/stats}) {
                my $body = join(' ', map { "$_=$st{$_}" } sort keys %st) . "\n";
                $plan{$fd} = [[ $t0, _head(200, ['Content-Length: ' . length $body]) . $body ], [ $t0, undef ]];
                $st{in_flight}++;    # balanced when the plan ends
                $st{served}--;
                next;
            }
            my $hold = ($q{hold} // 0) / 1000;
            my $mode = $q{mode} // 'header';
            my $status = $q{status} // 200;
            my ($lo, $hi) = ($q{lo} // 1, $q{hi} // 100);
            my $tokens = $lo + int(rand($hi - $lo + 1));
            $st{in_flight}++;
            my @p;
            if ($mode eq 'fail') {
                @p = ([ $t0 + $hold, undef ]);
                $st{failed}++;
            }
            elsif ($mode eq 'trailer') {
                my @parts = ("part 1\n", "part 2\n", "tokens=$tokens\n");
                @p = ([ $t0, _head($status, ['Transfer-Encoding: chunked', 'Trailer: X-Usage-Tokens']) ]);
                for my $i (0 .. 2) {
                    push @p, [ $t0 + $hold * ($i + 1) / 3,
                        sprintf('%x', length $parts[$i]) . "\r\n$parts[$i]\r\n" ];
                }
                $p[-1][1] .= "0\r\nX-Usage-Tokens: $tokens\r\n\r\n";
                push @p, [ $t0 + $hold, undef ];
            }
            else {
                my $v = $mode eq 'value' ? ($q{val} // '') : $tokens;
                my $body = "tokens=$v\n";
                my @h = ('Content-Length: ' . length $body);
                push @h, "X-Usage-Tokens: $v" unless $mode eq 'none';
                @p = ([ $t0 + $hold, _head($status, \@h) . $body ], [ $t0 + $hold, undef ]);
            }
            $plan{$fd} = \@p;
        }
        $now = time;
        for my $fd (keys %plan) {
            my $p = $plan{$fd};
            while (@$p && $p->[0][0] <= $now) {
                my ($when, $bytes) = @{ shift @$p };
                my $s = $sock{$fd};
                if (defined $bytes) {
                    $s->blocking(1);
                    syswrite $s, $bytes;
                    $s->blocking(0);
                    next;
                }
                delete $plan{$fd};
                $st{in_flight}--;
                $st{served}++;
                $sel->remove($s);
                delete $sock{$fd};
                delete $buf{$fd};
                close $s;
                last;
            }
        }
    }
}

sub _head {
    my ($status, $h) = @_;
    return "HTTP/1.1 $status " . ($REASON{$status} // 'Status') . "\r\n"
        . join('', map { "$_\r\n" } 'Content-Type: text/plain', @$h, 'Connection: close') . "\r\n";
}

sub stats {
    my ($port) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp')
        or die "token backend: $!";
    print $s "GET /stats HTTP/1.0\r\n\r\n";
    local $/;
    my $r = <$s> // '';
    close $s;
    my ($body) = $r =~ /\r\n\r\n(.*)/s;
    return { ($body // '') =~ /(\w+)=(-?\d+)/g };
}

1;
