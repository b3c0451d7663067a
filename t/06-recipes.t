#!/usr/bin/perl
# Every ```nginx block of docs/recipes.md passes "nginx -t" with the module
# (issue 39: a recipe's map failed it once), with no [warn].  A block is
# what an operator pastes: a whole http{} block, or directives of the http
# level, whose location{} blocks go into a server here.  What a block only
# names is supplied: Redis (ratelimit_redis), zones applied but defined in
# another recipe, upstreams, and the files it includes (empty).  Reads the
# docs and runs nginx -t only: no Redis, no request.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use File::Temp qw(tempdir);
use RateLimitTest;

my $MODULE = RateLimitTest::require_module();
my $NGINX = RateLimitTest::nginx_bin();
my $RECIPES = RateLimitTest::repo_dir() . '/docs/recipes.md';
my $TMP = tempdir('rlrecipes-XXXXXX', TMPDIR => 1, CLEANUP => 1);

# The blocks, each with its first line in the file.
sub blocks {
    open my $fh, '<', $RECIPES or die "$RECIPES: $!";
    my (@blocks, $open);
    while (my $line = <$fh>) {
        if (!$open && $line =~ /^```nginx\s*$/) {
            $open = { line => $. + 1, text => '' };
        } elsif ($open && $line =~ /^```\s*$/) {
            push @blocks, $open;
            undef $open;
        } elsif ($open) {
            $open->{text} .= $line;
        }
    }
    return @blocks;
}

# The block's top-level statements: a directive to its ';', or one with its
# {} block; comments dropped.
sub statements {
    my ($text) = @_;
    $text =~ s/#[^\n]*//g;
    my @out;
    my ($cur, $depth, $quote) = ('', 0, '');
    for my $c (split //, $text) {
        $cur .= $c;
        if ($quote) { $quote = '' if $c eq $quote; next }
        if ($c eq '"' || $c eq "'") { $quote = $c; next }
        $depth++ if $c eq '{';
        $depth-- if $c eq '}';
        if ($depth == 0 && ($c eq ';' || $c eq '}')) {
            push @out, $cur =~ s/^\s+|\s+$//gr;
            $cur = '';
        }
    }
    return grep { length } @out;
}

# What the block names and does not define, as http-level directives.
sub supplies {
    my ($text) = @_;
    my %zones = map { $_ => 1 } $text =~ /ratelimit_zone\s+(\w+)/g;
    my %ups = map { $_ => 1 } $text =~ /upstream\s+(\w+)/g;
    my $add = "ratelimit_redis 127.0.0.1:6379;\n";
    for my $z (sort keys %{{ map { $_ => 1 } $text =~ /\bzone=(\w+)/g }}) {
        $add .= "ratelimit_zone $z key=\$binary_remote_addr limit=10 window=1m;\n"
            unless $zones{$z};
    }
    for my $u (sort keys %{{ map { $_ => 1 } $text =~ m{(?:proxy|grpc)_pass\s+\w+://(\w+)[;/]}g }}) {
        $add .= "upstream $u { server 127.0.0.1:1; }\n" unless $ups{$u};
    }
    return $add;
}

sub conf_of {
    my ($text) = @_;
    $text =~ s{\binclude\s+\S+;}{include $TMP/empty.conf;}g;
    my $main = "load_module $MODULE;\nerror_log $TMP/error.log;\n"
             . "pid $TMP/nginx.pid;\nevents { }\n";
    if ($text =~ /^\s*http\s*\{/m) {
        my $add = supplies($text);
        return $main . ($text =~ s/^(\s*http\s*\{)/$1\n$add/mr);
    }
    my (@http, @server);
    for my $s (statements($text)) {
        if ($s =~ /^location\b/) { push @server, $s } else { push @http, $s }
    }
    return $main . "http {\n" . supplies($text) . join("\n", @http)
         . "\nserver {\n    listen 127.0.0.1:1;\n" . join("\n", @server)
         . "\n}\n}\n";
}

# An nginx built from source logs to PREFIX/logs/ until the configuration
# says otherwise (Debian's to /var/log/nginx/): nginx -t opens those files.
mkdir "$TMP/logs" or die "$TMP/logs: $!";
open my $empty, '>', "$TMP/empty.conf" or die $!;
close $empty;

my @blocks = blocks();
cmp_ok(scalar @blocks, '>=', 10, 'docs/recipes.md has its nginx blocks (' . scalar(@blocks) . ')');

for my $b (@blocks) {
    my $conf = "$TMP/recipe-$b->{line}.conf";
    open my $fh, '>', $conf or die "$conf: $!";
    print $fh conf_of($b->{text});
    close $fh;
    my $out = `$NGINX -t -p $TMP -c $conf 2>&1`;
    my $ok = $? == 0 && $out !~ /\[(?:warn|emerg)\]/;
    ok($ok, "the recipe at docs/recipes.md:$b->{line} passes nginx -t, no warning")
        or diag($out);
}

done_testing();
