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

use FindBin qw($Bin);
use lib $Bin;
use CallgrindRedis;
use RateLimitTest::Env qw(window_script);

my ($LINES) = @ARGV;
my $redis = CallgrindRedis->start;

my $text = window_script();
if (defined $LINES && $LINES eq 'time') {
    $text = "local t = redis.call('TIME')\nreturn 1\n";
} elsif (defined $LINES) {
    $text = join('', (split /^/, $text)[0 .. $LINES - 1]) . "return {now}\n";
}
my $sha = $redis->command('SCRIPT', 'LOAD', $text);
my @call = ('EVALSHA', $sha, 0, 1, 1000000, 1000, 60, 's', '1');
$redis->command(@call) for 1 .. 200;
$redis->zero;
$redis->command(@call) for 1 .. 1000;
my $total = $redis->instructions;
$redis->stop;
my $what = !defined $LINES ? 'the window script'
         : $LINES eq 'time' ? 'TIME and return'
         : "the script's first $LINES lines";
printf "%s: %.0f instructions a call\n", $what, $total / 1000;
