#!/usr/bin/perl
# Reads valgrind logs (one per nginx process) and fails if any error or
# definite leak has a stack frame in the module: its .so or its sources.
# Usage: valgrind_scan.pl LOG...

use strict;
use warnings;

my $ours = qr{ngx_http_ratelimit_module\.so|/ngx_module/|/src/(?:\w+/)*\w+\.cpp
              |ratelimit::}x;
my $kind = qr{Invalid[ ](?:read|write|free)|uninitialised|Mismatched[ ]free
              |definitely[ ]lost|overlap|Syscall[ ]param}x;
my ($records, $bad) = (0, 0);

for my $log (@ARGV) {
    open my $fh, '<', $log or die "$log: $!";
    my @record;
    my $flush = sub {
        my $text = join '', @record;
        @record = ();
        return unless $text =~ $kind;
        $records++;
        return unless $text =~ $ours;
        $bad++;
        print "== $log\n$text\n";
    };
    while (my $line = <$fh>) {
        # A record ends at a line holding only the ==PID== prefix.
        if ($line =~ /^==\d+==\s*$/) {
            $flush->();
        } else {
            push @record, $line;
        }
    }
    $flush->();
}

printf "valgrind: %d log(s), %d error or leak record(s), %d in the module\n",
    scalar @ARGV, $records, $bad;
exit($bad ? 1 : 0);
