#!/usr/bin/perl
# Writes the C++ file that embeds the window script (window_script()):
#
#   perl assemble.pl LUA_DIR PROTOCOL_HEADER OUT.cpp
#
# joins the parts in LUA_DIR in the order below, drops their comments
# (lines of their own starting with "--"), blank lines, every line's
# indentation and the spaces beside punctuation outside quotes (Lua needs
# none of them), and writes each @kName@ as batch_protocol.hpp's constant
# kName (a character as itself, @kName.byte@ as its code, a number as its
# digits), so that Redis gets less text to load and compile.  Run by the
# nginx build (config.make) and CMake (src/CMakeLists.txt); it refuses a
# part missing from its order, a comment after code, and a name the header
# does not define.

use strict;
use warnings;

my @PARTS = qw(call gcra packed side override window entries settle lease
               decide batch);

# The careful path's parts, wrapped in one function that returns decide(),
# shape(), side_value() and tell(): their functions are made by a call's
# first request that needs them, not by every call.  Lua makes a script's functions afresh on
# each call, each upvalue looked up among the chunk's open ones, and most
# calls take the fast path alone.
my @CAREFUL = qw(override window entries settle lease decide);

my ($dir, $header, $out) = @ARGV;
die "usage: $0 LUA_DIR PROTOCOL_HEADER OUT.cpp\n" unless defined $out;

sub slurp {
    my ($path) = @_;
    open my $fh, '<', $path or die "$path: $!\n";
    local $/;
    return scalar <$fh>;
}

my %value;
for (split /\n/, slurp($header)) {
    if (/^constexpr char (k\w+) = '(.)';/) {
        $value{$1} = $2;
        $value{"$1.byte"} = ord $2;
    } elsif (/^constexpr std::size_t (k\w+) = (\d+);/) {
        $value{$1} = $2;
    }
}

# Lua needs a space between two words or numbers only: beside these it
# needs none.  Not beside "-" ("- -" made "--", a comment) nor "." ("1 .."
# made "1..", a malformed number).
my $PUNCT = quotemeta '=,(){}[]+*/<>~;:#%^';

# `line` (of `path`) without the spaces beside $PUNCT outside its quoted
# strings.
sub squeeze {
    my ($line, $path) = @_;
    my $out = '';
    while ($line =~ /\G('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^'"]+)/gc) {
        my $part = $1;
        if ($part !~ /^['"]/) {
            $part =~ s/ +(?=[$PUNCT])//g;
            $part =~ s/(?<=[$PUNCT]) +//g;
            die "$path: a long bracket (not squeezed): $line\n"
                if $part =~ /\[[=\[]/;
        }
        $out .= $part;
    }
    die "$path: a string left open: $line\n"
        if (pos($line) // 0) != length $line;
    return $out;
}

my %known = map { ("$_.lua" => 1) } @PARTS;
opendir my $dh, $dir or die "$dir: $!\n";
for (grep { /\.lua$/ } readdir $dh) {
    die "$dir/$_ is not in $0's order\n" unless $known{$_};
}

my $script = '';
for my $part (@PARTS) {
    my $path = "$dir/$part.lua";
    my $text = '';
    for my $line (split /\n/, slurp($path)) {
        next if $line =~ /^\s*--/;
        die "$path: a comment after code (put it on a line of its own):"
            . " $line\n" if $line =~ /--/;
        $line =~ s{@([\w.]+)@}{
            $value{$1} // die "$path: $1 is not in $header\n"
        }ge;
        die "$path: an unknown placeholder: $line\n" if $line =~ /@/;
        $line =~ s/^\s+//;
        $text .= squeeze($line, $path) . "\n" if $line ne '';
    }
    $text = "local function careful_path()\n$text" if $part eq $CAREFUL[0];
    $text .= "return decide,shape,side_value,tell\nend\n"
        if $part eq $CAREFUL[-1];
    $script .= "\n$text";
}
$script =~ s/\n{3,}/\n\n/g;
$script =~ s/\A\n+/\n/;
$script =~ s/\n+\z/\n/;
die "the script holds the raw string's end \")lua\"\"\n"
    if $script =~ /\)lua"/;

open my $fh, '>', "$out.tmp" or die "$out.tmp: $!\n";
print $fh <<"END";
// Written by src/scripts/lua/assemble.pl from src/scripts/lua/*.lua and
// src/protocol/batch_protocol.hpp at build time: edit those, not this.
#include "scripts/window_script.hpp"

namespace ratelimit {

namespace {

constexpr char kScript[] = R"lua($script)lua";

}  // namespace

std::string_view window_script()
{
    return {kScript, sizeof(kScript) - 1};
}

}  // namespace ratelimit
END
close $fh or die "$out.tmp: $!\n";
rename "$out.tmp", $out or die "$out: $!\n";
