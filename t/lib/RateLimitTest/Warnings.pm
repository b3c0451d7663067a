package RateLimitTest::Warnings;

# A Perl warning in a test is a failure.  Loading this module (RateLimitTest
# does) installs a __WARN__ handler: in the test process a warning is a
# failed test named after it; in a forked child (HTTP clients, load
# generators, fake servers) it is written to a file that the test process
# reads at its end, failing the run (exit status 255) when it is not empty.

use strict;
use warnings;

use Test::More ();
use File::Spec;

our $OWNER_PID = $$;
# Made by the first child that warns (nothing is left behind by "perl -c",
# which runs no END block).
my $CHILD_LOG = File::Spec->catfile(File::Spec->tmpdir,
    sprintf('rltest-warnings-%d-%d', $$, int rand 1e9));

$SIG{__WARN__} = sub {
    my ($msg) = @_;
    if ($$ == $OWNER_PID) {
        local $Test::Builder::Level = $Test::Builder::Level + 1;
        Test::More::fail("no Perl warning: $msg");
        return;
    }
    print STDERR "Perl warning in child $$: $msg";
    if (open my $fh, '>>', $CHILD_LOG) {
        print {$fh} "pid $$: $msg";
        close $fh;
    }
};

END {
    if ($$ == $OWNER_PID && defined $CHILD_LOG) {
        my $text = '';
        if (open my $fh, '<', $CHILD_LOG) { local $/; $text = <$fh> // ''; close $fh; unlink $CHILD_LOG }
        if (length $text) {
            Test::More::diag("Perl warnings in forked children:\n$text");
            $? = 255 unless $?;
        }
    }
}

1;
