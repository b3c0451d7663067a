#!/usr/bin/env perl
# The flake census: runs integration files again and again and tabulates
# every failure, so that a test that fails by chance is found, not rerun.
#
#   RATELIMIT_MODULE=build/ngx_http_ratelimit_module.so \
#       perl t/census.pl --rounds 5 --jobs 3 --out build/census t/*.t
#
# --rounds N   runs of the whole list (default 5)
# --jobs J     files run at once by prove (default 1; 3 loads 2 cores)
# --out DIR    where each round's output goes (round-N.log) and the table
#              (census.md), written anew after every round
# --label L    names the runs in the table (e.g. "1.31.4, -j3")
# NGINX_BIN and RATELIMIT_REDIS_MODULE pass through to the tests.
use strict;
use warnings;
use Getopt::Long;
use File::Path qw(make_path);

my ($rounds, $jobs, $out, $label) = (5, 1, 'build/census', '');
GetOptions('rounds=i' => \$rounds, 'jobs=i' => \$jobs, 'out=s' => \$out,
    'label=s' => \$label) && @ARGV
    or die "usage: $0 [--rounds N] [--jobs J] [--out DIR] [--label L]"
        . " t/NN-name.t ...\n";
$ENV{RATELIMIT_MODULE} or die "$0: set RATELIMIT_MODULE to the module\n";
make_path($out);

my (%failed, %runs);    # file => { test name => count }, file => runs
my @loads;              # the 5-minute load average at each round's end
for my $round (1 .. $rounds) {
    my $log = "$out/round-$round.log";
    system("prove -I t/lib -j $jobs --timer @ARGV > $log 2>&1");
    my $text = do { local (@ARGV, $/) = $log; <> };
    $runs{ name_of($_) }++ for @ARGV;
    push @loads, load();
    record(\%failed, $text, $round);
    write_table();
    printf "round %d of %d: %s\n", $round, $rounds,
        $text =~ /^Result: (\w+)/m ? $1 : 'no result';
}

# Failures of one round: Test::More's diagnostics name the test and file;
# a file that died without them is counted under its prove summary line.
sub record {
    my ($failed, $text, $round) = @_;
    my %seen;
    while ($text =~ /#\s+Failed test '([^']*)'\n#\s+at (\S+) line/g) {
        my ($name, $file) = ($1, name_of($2));
        $failed->{$file}{$name}{count}++;
        push @{ $failed->{$file}{$name}{rounds} }, $round;
        $seen{$file} = 1;
    }
    while ($text =~ m{^(\S*t/[^/\s]+\.t)\s+\(Wstat: (\d+)}mg) {
        my ($file, $wstat) = (name_of($1), $2);
        next if $seen{$file};
        my $name = "(exited, wait status $wstat, no failed test named)";
        $failed->{$file}{$name}{count}++;
        push @{ $failed->{$file}{$name}{rounds} }, $round;
    }
}

# A file as the tables name it, "t/NN-name.t", however it was given.
sub name_of {
    return $_[0] =~ s{.*/(t/[^/]+\.t)$}{$1}r;
}

sub load {
    open my $fh, '<', '/proc/loadavg' or return '?';
    return (split ' ', <$fh>)[1];
}

sub write_table {
    open my $fh, '>', "$out/census.md" or die "$out/census.md: $!\n";
    print $fh "Runs: $label\n\n" if $label;
    print $fh "Load average (5 min) at each round's end: @loads\n\n";
    print $fh "| file | runs | failed | test (rounds) |\n"
        . "|---|---:|---:|---|\n";
    for my $file (sort keys %failed) {
        my $tests = $failed{$file};
        for my $name (sort keys %$tests) {
            printf $fh "| %s | %d | %d | %s (%s) |\n", $file,
                $runs{$file} // 0,
                $tests->{$name}{count}, $name,
                join(',', @{ $tests->{$name}{rounds} });
        }
    }
    my $clean = grep { !$failed{$_} } keys %runs;
    print $fh "\n$clean of " . scalar(keys %runs)
        . " files never failed in " . scalar(@loads) . " rounds.\n";
    close $fh;
}
