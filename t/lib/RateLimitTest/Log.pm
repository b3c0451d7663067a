package RateLimitTest::Log;

# nginx's logs: error.log and access.log (format "rltest") read, counted,
# waited for, parsed; no_alerts, the test every file ends with.  Methods of
# RateLimitTest (it inherits them).

use strict;
use warnings;

use Test::More ();
use Time::HiRes qw(time sleep);
use RateLimitTest::Env qw(_read_file);

sub error_log  { _read_file("$_[0]{tmp}/error.log") }
sub access_log { _read_file("$_[0]{tmp}/access.log") }

sub count_log {
    my ($self, $re, $text) = @_;
    $text //= $self->error_log;
    my $n = () = $text =~ /$re/g;
    return $n;
}

# Wait (up to $timeout s) until the error log matches $re at least $n times.
sub wait_log {
    my ($self, $re, $n, $timeout) = @_;
    $n //= 1;
    my $deadline = time + ($timeout // 2);
    my $c;
    while (($c = $self->count_log($re)) < $n && time < $deadline) { sleep 0.02 }
    return $c;
}

# Parsed access log entries (format "rltest") for which $filter (a URI string
# or a code ref called with the entry in $_) is true; waits (up to 2 s) until
# at least $min of them exist.
sub access_entries_for {
    my ($self, $filter, $min, $timeout) = @_;
    my $f = ref $filter ? $filter : sub { $_->{uri} eq $filter };
    my $deadline = time + ($timeout // 2);
    my @e;
    while (1) {
        @e = grep { $f->() } $self->access_entries;
        last if @e >= ($min // 0) || time > $deadline;
        sleep 0.02;
    }
    return @e;
}

# Parsed access log entries (format "rltest"); waits until at least $min entries exist.
sub access_entries {
    my ($self, $min, $timeout) = @_;
    my $deadline = time + ($timeout // 2);
    my @e;
    while (1) {
        @e = ();
        for my $line (split /\n/, $self->access_log) {
            next unless $line =~ /^(\S+) (\d+) pid=(\d+) rs="([^"]*)" lim="([^"]*)" rem="([^"]*)" reset="([^"]*)"/;
            push @e, { uri => $1, status => $2, pid => $3, rs => $4, lim => $5, rem => $6, reset => $7 };
        }
        last if !defined $min || @e >= $min || time > $deadline;
        sleep 0.02;
    }
    return @e;
}

# Test: no [alert] / [emerg] (and no worker crash) in error.log.
sub no_alerts {
    my ($self, $name) = @_;
    my @bad = grep { /\[(?:alert|emerg)\]/ || /exited on signal/ } split /\n/, $self->error_log;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    Test::More::ok(!@bad, $name // 'no [alert] or [emerg] in error.log')
        or Test::More::diag(join "\n", @bad[0 .. ($#bad < 19 ? $#bad : 19)]);
}

1;
