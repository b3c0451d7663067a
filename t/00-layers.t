#!/usr/bin/perl
# The include layering of ngx_module/, redis_module/ and src/.  Each folder's
# README.md says in a line "May include: a, b" which folders of its own tree
# its files may include besides their own; ngx_module/ and redis_module/ may
# include any folder of src/, src/ neither of them; only ngx_module/ includes
# an nginx header.  Includes name their folder from the tree's root
# ("redis/redis_link.hpp").  Checked: every file is in a folder
# with such a line, every include resolves and is allowed, no two folders
# include each other (nor in a longer cycle), and no two files (a .cpp with
# its .hpp) depend on each other.  No file of src/, its unit tests too,
# includes hiredis: replies reach src/ as plain values (replies/).  Reads
# files only: no nginx, no Redis.

use strict;
use warnings;

use Test::More;
use File::Find;
use FindBin qw($Bin);

my $ROOT = "$Bin/..";
# Each tree, and the trees besides itself its files may include.
my %TREES = (ngx_module => ['src'], redis_module => ['src'], src => []);

my (%allowed, %sources, @bad_folder, @bad_include);

sub folder_of { my ($rel) = @_; $rel =~ m{^(.*)/[^/]+$} ? $1 : '.' }

# The folders a folder may include, from its README; undef if it says none.
sub rules_of {
    my ($tree, $folder) = @_;
    my $key = "$tree/$folder";
    return $allowed{$key} if exists $allowed{$key};
    my $readme = "$ROOT/$tree/$folder/README.md";
    my $rules;
    if (open my $fh, '<', $readme) {
        while (<$fh>) {
            next unless /^May include:\s*(.*?)\s*$/;
            $rules = { map { $_ => 1 } grep { length } split /\s*,\s*/, $1 };
            last;
        }
    }
    return $allowed{$key} = $rules;
}

for my $tree (sort keys %TREES) {
    find({ no_chdir => 1, wanted => sub {
        return unless /\.(?:cpp|hpp)$/;
        (my $rel = $File::Find::name) =~ s{^\Q$ROOT/$tree/\E}{};
        return if $tree ne 'ngx_module' && $rel =~ m{^test/};
        $sources{"$tree/$rel"} = [$tree, $rel];
    } }, "$ROOT/$tree");
}

ok(keys %sources > 40, 'source files found: ' . scalar keys %sources);

my (%folder_edges, %unit_edges);

for my $path (sort keys %sources) {
    my ($tree, $rel) = @{ $sources{$path} };
    my $folder = folder_of($rel);
    my $rules = rules_of($tree, $folder);

    push @bad_folder, "$path: $tree/$folder/README.md has no 'May include:' line"
        unless defined $rules;

    open my $fh, '<', "$ROOT/$path" or die "$path: $!";
    (my $unit = $path) =~ s/\.[ch]pp$//;
    while (my $line = <$fh>) {
        if ($tree ne 'ngx_module' && $line =~ /^\s*#\s*include\s*[<"](ngx_\w+\.h)/) {
            push @bad_include, "$path:$.: $tree/ includes nginx's $1";
        }
        next unless $line =~ /^\s*#\s*include\s*"([^"]+)"/;
        my $inc = $1;
        my ($to_tree) = grep { -f "$ROOT/$_/$inc" }
            $tree, @{ $TREES{$tree} }, sort keys %TREES;
        if (!defined $to_tree) {
            push @bad_include, "$path:$.: \"$inc\" is not a path from "
                . join(', ', map { "$_/" } sort keys %TREES);
            next;
        }
        (my $to_unit = "$to_tree/$inc") =~ s/\.[ch]pp$//;
        $unit_edges{$unit}{$to_unit} = 1 if $to_unit ne $unit;

        if ($to_tree ne $tree) {
            push @bad_include, "$path:$.: $tree/ includes $to_tree/ \"$inc\""
                unless grep { $_ eq $to_tree } @{ $TREES{$tree} };
            next;
        }
        my $to_folder = folder_of($inc);
        next if $to_folder eq $folder;
        $folder_edges{"$tree/$folder"}{"$tree/$to_folder"} = "$path:$.";
        push @bad_include,
            "$path:$.: folder $folder may not include $to_folder (\"$inc\")"
            if defined $rules && !$rules->{$to_folder};
    }
}

is_deeply(\@bad_folder, [], 'every file is in a folder whose README says what it may include')
    or diag join "\n", @bad_folder;
is_deeply(\@bad_include, [], 'every include resolves and is allowed by its folder')
    or diag join "\n", @bad_include;

# A cycle in a graph of name => {name => 1}, as a list of names, or ().
sub find_cycle {
    my ($edges) = @_;
    my (%state, @stack);
    my $visit;
    $visit = sub {
        my ($n) = @_;
        $state{$n} = 1;
        push @stack, $n;
        for my $m (sort keys %{ $edges->{$n} || {} }) {
            if (($state{$m} // 0) == 1) {
                my ($at) = grep { $stack[$_] eq $m } 0 .. $#stack;
                return (@stack[$at .. $#stack], $m);
            }
            next if $state{$m};
            my @c = $visit->($m);
            return @c if @c;
        }
        pop @stack;
        $state{$n} = 2;
        return ();
    };
    for my $n (sort keys %$edges) {
        next if $state{$n};
        my @c = $visit->($n);
        return @c if @c;
    }
    return ();
}

my @folder_cycle = find_cycle(\%folder_edges);
is_deeply(\@folder_cycle, [], 'no two folders include each other')
    or diag join(' -> ', @folder_cycle);

# A file and its header are one unit: a .cpp that includes another unit's
# header depends on it.
my @unit_cycle = find_cycle(\%unit_edges);
is_deeply(\@unit_cycle, [], 'no two files depend on each other')
    or diag join(' -> ', @unit_cycle);

my @hiredis;
find({ no_chdir => 1, wanted => sub {
    return unless /\.(?:cpp|hpp)$/;
    (my $path = $File::Find::name) =~ s{^\Q$ROOT/\E}{};
    open my $fh, '<', $_ or die "$path: $!";
    while (my $line = <$fh>) {
        push @hiredis, "$path:$.: $1"
            if $line =~ /^\s*#\s*include\s*[<"]((?:hiredis\/)?hiredis\.h)/;
    }
} }, "$ROOT/src");
is_deeply(\@hiredis, [], 'src/ includes no hiredis header')
    or diag join "\n", @hiredis;

done_testing();
