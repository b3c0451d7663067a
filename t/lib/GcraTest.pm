package GcraTest;

# Helpers of the GCRA tests (t/8*.t): a client that sends requests at
# planned times, each on its own connection, many in flight at once; and
# limit_req's arithmetic (nginx's ngx_http_limit_req_module, which the spec
# of issue 27 takes as the meaning of a GCRA zone), for planning traces and
# explaining their differences.
#
#   use GcraTest qw(play model_new model_decide);
#
#   my @res = play(\@plan, timeout => 5);
#     @plan: { at => seconds from the start, port => P, path => '/x/',
#              headers => { ... }, (anything else is kept) } sorted or not.
#     Each connection is opened ~30 ms before its time and its request
#     written at its time (HTTP/1.0, Connection: close).  Each result is the
#     plan's entry with: sent (epoch s), done (epoch s), status (0 if none),
#     rheaders (lc name => value), body, err ('' if none).  The start is
#     $o{start} (epoch) or 0.2 s from now; $o{leave}->($entry) may say to
#     close the connection that many seconds after the write (a client that
#     leaves).
#
#   my $m = model_new(rate => 10, burst => 5, delay => 2 | 'nodelay');
#   my $d = model_decide($m, $t);   # $t in seconds, increasing
#     { outcome => 'once' | 'delayed' | 'rejected', delay => s,
#       margin => s to the nearest decision boundary (rejected / delayed) }
#   my $d = model_decide_all([$m1, $m2], $t);   # several zones, all or nothing
#     The state is the theoretical arrival time (TAT): limit_req's excess
#     e after a request is (TAT - now) / T - 1, so the two agree exactly
#     but for their clocks' granularity.

use strict;
use warnings;

use IO::Socket::INET;
use IO::Select;
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use Time::HiRes qw(time sleep);
use Exporter 'import';

our @EXPORT_OK = qw(play model_new model_decide model_decide_all);

sub _request {
    my ($e) = @_;
    my $h = $e->{headers} // {};
    return join("\r\n", "GET $e->{path} HTTP/1.0", 'Host: localhost',
        (map { "$_: $h->{$_}" } sort keys %$h), 'Connection: close', '', '');
}

sub _parse {
    my ($e, $buf) = @_;
    my ($head, $body) = split /\r\n\r\n/, $buf, 2;
    if (defined $head && $head =~ m{^HTTP/\d\.\d (\d{3})}) {
        $e->{status} = $1;
        for my $l (split /\r\n/, $head) {
            $e->{rheaders}{ lc $1 } = $2 if $l =~ /^([^:]+):\s*(.*)$/;
        }
    }
    $e->{body} = $body // '';
    $e->{err} ||= 'no HTTP response' unless $e->{status};
}

sub play {
    my ($plan, %o) = @_;
    my $timeout = $o{timeout} // 5;
    my $start = $o{start} // time + 0.2;
    my @todo = sort { $a->{at} <=> $b->{at} } map { +{ %$_, status => 0,
        rheaders => {}, body => '', err => '' } } @$plan;
    my @open_q = @todo;    # to connect, in time order
    my @send_q;            # connected, to write, in time order
    my %live;              # fileno => entry (written, reading)
    my @leaving;           # entries to close early
    my $sel = IO::Select->new;
    while (@open_q || @send_q || %live) {
        my $now = time;
        while (@open_q && $start + $open_q[0]{at} - 0.03 <= $now) {
            my $e = shift @open_q;
            my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                PeerPort => $e->{port}, Proto => 'tcp', Timeout => 2);
            if (!$s) { $e->{err} = "connect: $!"; next }
            setsockopt($s, IPPROTO_TCP, TCP_NODELAY, 1);
            binmode $s;
            $e->{sock} = $s;
            push @send_q, $e;
        }
        $now = time;
        while (@send_q && $start + $send_q[0]{at} <= $now) {
            my $e = shift @send_q;
            my $req = _request($e);
            $e->{sent} = time;
            my $n = syswrite($e->{sock}, $req);
            if (!defined $n || $n != length $req) {
                $e->{err} = 'short write';
                close delete $e->{sock};
                next;
            }
            $e->{buf} = '';
            $live{ fileno $e->{sock} } = $e;
            $sel->add($e->{sock});
            if ($o{leave} && defined(my $after = $o{leave}->($e))) {
                $e->{leave_at} = $e->{sent} + $after;
                push @leaving, $e;
            }
        }
        $now = time;
        for my $e (grep { $_->{sock} && $_->{leave_at} <= $now } @leaving) {
            $sel->remove($e->{sock});
            delete $live{ fileno $e->{sock} };
            close delete $e->{sock};
            $e->{done} = time;
            $e->{err} = 'left';
        }
        @leaving = grep { $_->{sock} } @leaving;
        for my $e (values %live) {
            next if $now - $e->{sent} < $timeout;
            $sel->remove($e->{sock});
            delete $live{ fileno $e->{sock} };
            close delete $e->{sock};
            $e->{done} = $now;
            $e->{err} = 'timeout';
            _parse($e, delete $e->{buf});
        }
        my @next = grep { defined } (
            @open_q ? $start + $open_q[0]{at} - 0.03 : undef,
            @send_q ? $start + $send_q[0]{at} : undef,
            map { $_->{leave_at} } @leaving);
        my ($wake) = sort { $a <=> $b } @next;
        my $wait = defined $wake ? $wake - time : 0.05;
        $wait = 0 if $wait < 0;
        $wait = 0.05 if $wait > 0.05;
        if (!$sel->count) { sleep $wait if $wait > 0; next }
        for my $s ($sel->can_read($wait)) {
            my $e = $live{ fileno $s } or next;
            my $n = sysread($s, my $chunk, 65536);
            if ($n) { $e->{buf} .= $chunk; next }
            $e->{done} = time;
            $e->{err} = "read: $!" unless defined $n;
            $sel->remove($s);
            delete $live{ fileno $s };
            close delete $e->{sock};
            _parse($e, delete $e->{buf});
        }
    }
    delete $_->{buf} for @todo;
    $_->{start} = $start for @todo;
    return @todo;
}

# ---------------------------------------------------------------------------
# limit_req's arithmetic, as a theoretical arrival time

sub model_new {
    my (%o) = @_;
    my $T = 1 / $o{rate};
    my $nodelay = ($o{delay} // 0) eq 'nodelay';
    return { T => $T, burst => $o{burst} // 0, nodelay => $nodelay,
             delay => $nodelay ? 0 : ($o{delay} // 0), tat => 0 };
}

# Several zones on one request (limit_req's several limit_req directives,
# the module's several ratelimit): rejected if any zone rejects it, then
# counted in none; else counted in all, waiting the longest of their waits.
# The margin is the nearest boundary of any zone.
sub model_decide_all {
    my ($models, $t) = @_;
    my @try = map { +{ %$_ } } @$models;
    my @d = map { model_decide($_, $t) } @try;
    my ($margin) = sort { $a <=> $b } map { $_->{margin} } @d;
    if (grep { $_->{outcome} eq 'rejected' } @d) {
        return { outcome => 'rejected', delay => 0, margin => $margin };
    }
    %{ $models->[$_] } = %{ $try[$_] } for 0 .. $#try;
    my ($delay) = sort { $b <=> $a } map { $_->{delay} } @d;
    return { outcome => $delay > 0 ? 'delayed' : 'once', delay => $delay, margin => $margin };
}

sub model_decide {
    my ($m, $t) = @_;
    my ($T, $burst, $M) = @$m{qw(T burst delay)};
    my $tat = $m->{tat};
    my $ahead = $tat > $t ? $tat - $t : 0;
    # rejected while t < tat - b*T; delayed while t < tat - M*T
    my @bounds = ($tat - $burst * $T);
    push @bounds, $tat - $M * $T unless $m->{nodelay};
    my ($margin) = sort { $a <=> $b } map { abs($t - $_) } @bounds;
    if ($ahead > $burst * $T) {
        return { outcome => 'rejected', delay => 0, margin => $margin,
                 ahead => $ahead };
    }
    $m->{tat} = ($tat > $t ? $tat : $t) + $T;
    my $delay = $m->{nodelay} ? 0 : $ahead - $M * $T;
    $delay = 0 if $delay < 0;
    return { outcome => $delay > 0 ? 'delayed' : 'once', delay => $delay,
             margin => $margin, ahead => $ahead };
}

1;
