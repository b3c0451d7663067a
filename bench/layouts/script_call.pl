#!/usr/bin/perl
# Redis instructions (callgrind) of one EVALSHA of the window script with
# one zone and no request: what a call costs before it decides anything.
#
#   perl -I t/lib bench/layouts/script_call.pl [LINES]
#
# LINES: only the script's first LINES lines (as Redis gets it, comments
# dropped), then "return {now}": where the cost is, by cutting.  "time":
# a script that reads TIME and returns, the floor.  1,000 calls measured
# after 200 of warm-up.

use strict;
use warnings;

use File::Temp qw(tempdir);
use IO::Socket::UNIX;
use Time::HiRes qw(sleep);
use RateLimitTest::Env qw(window_script);

my ($LINES) = @ARGV;
my $dir = tempdir('script-call-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $pid = fork // die "fork: $!\n";
if (!$pid) {
    open STDOUT, '>', "$dir/valgrind.out";
    open STDERR, '>&', \*STDOUT;
    exec 'valgrind', '--tool=callgrind', "--callgrind-out-file=$dir/cg",
        'redis-server', '--port', '0', '--unixsocket', "$dir/redis.sock",
        '--save', '', '--appendonly', 'no';
    die "exec valgrind: $!\n";
}

# A run that dies stops its redis-server.
END {
    if ($pid && kill 0, $pid) {
        kill 'TERM', $pid;
        waitpid $pid, 0;
    }
}

my $s;
for (1 .. 600) {
    last if $s = IO::Socket::UNIX->new(Peer => "$dir/redis.sock");
    sleep 0.1;
}
die "redis-server under valgrind did not come up\n" unless $s;

sub reply {
    my $line = <$s> // die "redis closed\n";
    die "redis: $line" if $line =~ /^-/;
    if ($line =~ /^\*(\d+)/) {
        reply() for 1 .. $1;
    } elsif ($line =~ /^\$(\d+)/) {
        $line = <$s>;
    }
    return $line;
}

sub command {
    print {$s} join '', '*' . @_ . "\r\n",
        map { '$' . length($_) . "\r\n$_\r\n" } @_;
    return reply();
}

my $text = window_script();
if (defined $LINES && $LINES eq 'time') {
    $text = "local t = redis.call('TIME')\nreturn 1\n";
} elsif (defined $LINES) {
    $text = join('', (split /^/, $text)[0 .. $LINES - 1]) . "return {now}\n";
}
my ($sha) = command('SCRIPT', 'LOAD', $text) =~ /(\w{40})/;
my @call = ('EVALSHA', $sha, 0, 1, 1000000, 1000, 60, 's', '1');
command(@call) for 1 .. 200;
system("callgrind_control -z $pid >/dev/null 2>&1") == 0
    or die "callgrind zero\n";
command(@call) for 1 .. 1000;
system("callgrind_control -d $pid >/dev/null 2>&1") == 0
    or die "callgrind dump\n";
print {$s} "*2\r\n\$8\r\nSHUTDOWN\r\n\$6\r\nNOSAVE\r\n";
waitpid $pid, 0;

my ($dump) = grep { !/\/cg$/ } glob("$dir/cg.*");
my ($total) = `callgrind_annotate $dump` =~ /^\s*([\d,]+)\s.*PROGRAM TOTALS/m;
$total =~ tr/,//d;
my $what = !defined $LINES ? 'the window script'
         : $LINES eq 'time' ? 'TIME and return'
         : "the script's first $LINES lines";
printf "%s: %.0f instructions a call\n", $what, $total / 1000;
