package PromText;

# The Prometheus text of a `ratelimit_metrics` location, read into a hash.
#
#   my $m = PromText::scrape($t[, '/metrics']);   # dies unless 200
#   PromText::value($m, 'nginx_ratelimit_settles_total', zone => 'z', outcome => 'applied')
#       the sample's value, 0 when the scrape has no such sample (a counter
#       never incremented may be left out)
#
# Samples are keyed "name{k=v,...}", labels sorted by name, values unescaped
# only as far as the tests need (no quotes in zone names).

use strict;
use warnings;

sub parse {
    my ($text) = @_;
    my %v;
    for my $line (split /\n/, $text) {
        next if $line =~ /^\s*(?:#|$)/;
        next unless $line =~ /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/;
        my ($name, $labels, $value) = ($1, $2 // '', $3);
        my %l = $labels =~ /(\w+)="((?:[^"\\]|\\.)*)"/g;
        $v{ key($name, %l) } = $value;
    }
    return \%v;
}

sub key {
    my ($name, %l) = @_;
    return $name . '{' . join(',', map { "$_=$l{$_}" } sort keys %l) . '}';
}

sub scrape {
    my ($t, $path) = @_;
    my $r = $t->get($path // '/metrics');
    die "metrics scrape answered $r->{status}: $r->{content}\n" unless $r->{status} == 200;
    return parse($r->{content});
}

sub value {
    my ($m, $name, %l) = @_;
    return $m->{ key($name, %l) } // 0;
}

1;
