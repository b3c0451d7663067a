#!/usr/bin/perl
# The Redis round trip under load, for bench/run.pl's latency pass
# (BENCH_LATENCY=1): a client process of its own that times COUNT PINGs to
# 127.0.0.1:PORT spread over SECONDS (one connection, one PING at a time,
# each after a pause with some jitter, so they do not fall in step with the
# load tool's ticks) and writes one round trip in microseconds a line to OUT.
#
#   perl bench/ping.pl PORT COUNT SECONDS OUT

use strict;
use warnings;
use IO::Socket::INET;
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use Time::HiRes qw(time sleep);

my ($port, $count, $seconds, $out) = @ARGV;
die "usage: $0 PORT COUNT SECONDS OUT\n" unless $out;

my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp')
    or die "connect 127.0.0.1:$port: $!\n";
setsockopt($s, IPPROTO_TCP, TCP_NODELAY, 1);
binmode $s;

my $gap = $seconds / $count;
my $t_end = time + $seconds + 5;
my @rtt;
for my $i (1 .. $count) {
    sleep($gap * (0.5 + rand()));
    my $t0 = time;
    syswrite($s, "PING\r\n") == 6 or die "write: $!\n";
    my $buf = '';
    while ($buf !~ /\r\n\z/) {
        my $n = sysread($s, $buf, 64, length $buf);
        die "read: " . (defined $n ? 'closed' : $!) . "\n" unless $n;
    }
    my $t1 = time;
    die "unexpected reply $buf" unless $buf eq "+PONG\r\n";
    push @rtt, ($t1 - $t0) * 1e6;
    last if $t1 > $t_end;
}
open my $fh, '>', $out or die "open $out: $!\n";
printf {$fh} "%.1f\n", $_ for @rtt;
close $fh or die "close $out: $!\n";
