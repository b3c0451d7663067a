#!/usr/bin/perl
# The window script's batch protocol has one home in C++,
# src/protocol/batch_protocol.hpp: its wire codes and reply widths are named
# there and nowhere else.  Checked: the files that write or read a batch
# include it, and no C++ file that includes it (src/, ngx_module/,
# redis_module/) spells a protocol literal in its code (comments and the
# Lua of raw strings aside): a character literal of a letter, a digit, ","
# or ":" (an entry's kind, a zone's kind or flag, a separator); a string of
# one letter or digit compared with == or != (a zone's argument); a list
# of the header's codes as strings, or a RESP bulk of one byte; or a
# multiplication, division or += by a digit from 3 to 9 (a reply's width,
# the arguments per zone; 2 is left alone, it counts pairs).  The Lua of
# src/scripts/lua/ takes them from the header too (assemble.pl).  The
# refusals nginx tells by their text have one home too,
# src/scripts/decide_command.hpp (below).  Reads files only: no nginx, no
# Redis.

use strict;
use warnings;

use Test::More;
use File::Find;
use FindBin qw($Bin);

my $ROOT = "$Bin/..";
my $HEADER = 'protocol/batch_protocol.hpp';

# The writer (nginx), the decoding of replies (nginx) and the Redis
# module's command: each takes the protocol from the header.
my @SPEAKERS = qw(src/scripts/script_batch.cpp src/scripts/window_script.cpp
                  redis_module/command/batch_call.cpp
                  redis_module/zones/batch.cpp
                  redis_module/zones/batch_decider.cpp);

my %sources;
for my $tree (qw(src ngx_module redis_module)) {
    find({ no_chdir => 1, wanted => sub {
        return unless /\.(?:cpp|hpp)$/;
        (my $rel = $File::Find::name) =~ s{^\Q$ROOT/\E}{};
        return if $rel =~ m{^(?:src|redis_module)/test/}
                  || $rel eq "src/$HEADER";
        $sources{$rel} = 1;
    } }, "$ROOT/$tree");
}

sub slurp {
    my ($path) = @_;
    open my $fh, '<', "$ROOT/$path" or die "$path: $!";
    local $/;
    return scalar <$fh>;
}

sub includes_header {
    my ($text) = @_;
    return $text =~ m{^\s*#\s*include\s*"\Q$HEADER\E"}m;
}

# The code of a file: raw strings (the Lua) emptied, comments blanked,
# lines kept so that a finding names its line.
sub code_of {
    my ($text) = @_;
    $text =~ s{R"(\w*)\((.*?)\)\1"}{my $s = $2; $s =~ s/[^\n]//g; "R\"\"$s"}gse;
    $text =~ s{/\*(.*?)\*/}{my $s = $1; $s =~ s/[^\n]//g; $s}gse;
    $text =~ s{//[^\n]*}{}g;
    return $text;
}

# The header's character codes.
my $CODES = join '', map { quotemeta } slurp("src/$HEADER") =~ /=\s*'(.)';/g;
my $ONE = qr/"[$CODES]"/;

my %PATTERNS = (
    'a character literal of a code' => qr/'[A-Za-z0-9,:]'/,
    'a one-character string compared' =>
        qr/[=!]=\s*"[A-Za-z0-9]"|"[A-Za-z0-9]"\s*[=!]=/,
    'a list of codes as strings' => qr/\{\s*$ONE(?:\s*,\s*$ONE)+\s*\}/,
    'a bulk of one byte' => qr/"\$1\\r\\n[^"\\]\\r\\n"/,
    'a width by a digit' => qr{(?<![\w.])[3-9]\s*[*/](?!=)
                               |[*/]\s*[3-9](?![\w.])
                               |\+=\s*[3-9](?![\w.])}x,
);

my (@missing, @found);
for my $path (@SPEAKERS) {
    push @missing, "$path does not exist", next unless $sources{$path};
    push @missing, "$path does not include \"$HEADER\""
        unless includes_header(slurp($path));
}

my $checked = 0;
for my $path (sort keys %sources) {
    my $text = slurp($path);
    next unless includes_header($text);
    $checked++;
    my @lines = split /\n/, code_of($text), -1;
    for my $i (0 .. $#lines) {
        for my $what (sort keys %PATTERNS) {
            push @found, "$path:" . ($i + 1) . ": $what: $lines[$i]"
                if $lines[$i] =~ $PATTERNS{$what};
        }
    }
}

# The script's parts name the codes by the header's names, which
# assemble.pl fills in: an entry's kind is not compared with a number nor
# spelled at a pattern's start.
my %LUA_PATTERNS = (
    'a kind compared with a number' => qr/\bkind\s*[~=]=\s*\d/,
    'a kind at a pattern\'s start' => qr/'\^[A-Za-z]/,
);
for my $path (sort glob "$ROOT/src/scripts/lua/*.lua") {
    (my $rel = $path) =~ s{^\Q$ROOT/\E}{};
    my @lines = split /\n/, slurp($rel), -1;
    for my $i (0 .. $#lines) {
        next if $lines[$i] =~ /^\s*--/;
        for my $what (sort keys %LUA_PATTERNS) {
            push @found, "$rel:" . ($i + 1) . ": $what: $lines[$i]"
                if $lines[$i] =~ $LUA_PATTERNS{$what};
        }
    }
}

# The refusals nginx tells by their text (src/scripts/decide_command.hpp)
# are spelt there only: no other C++ file spells one (the command returns
# the constant), and the script's parts, which assemble.pl gives no
# string, spell the one they share (a zone of unknown kind or mode, as a
# Redis module of the releases before bans refuses a zone that bans)
# exactly once.
my %refusal = slurp('src/scripts/decide_command.hpp')
              =~ /constexpr char (k\w+Refused)\[\] =\s*"([^"]*)";/g;
my @lua = map { slurp($_ =~ s{^\Q$ROOT/\E}{}r) } glob "$ROOT/src/scripts/lua/*.lua";
is(scalar(map { /'\Q$refusal{kZoneModeRefused}\E'/g } @lua), 1,
   "the script spells kZoneModeRefused's text once: $refusal{kZoneModeRefused}");
for my $name (sort keys %refusal) {
    push @found, map { "$_: ${name}'s text" }
        grep { code_of(slurp($_)) =~ /"\Q$refusal{$name}\E"/ }
        grep { $_ ne 'src/scripts/decide_command.hpp' } sort keys %sources;
}

is_deeply(\@missing, [], "the batch's writer and readers include $HEADER")
    or diag join "\n", @missing;
cmp_ok($checked, '>=', scalar @SPEAKERS, "files checked: $checked");
is_deeply(\@found, [], 'no protocol literal outside the header')
    or diag join "\n", @found;

done_testing();
