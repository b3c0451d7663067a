#!/usr/bin/perl
# nginx's own test suite (nginx-tests) run twice against one nginx binary:
# as it is, and with the module loaded and applied to every request at the
# http{} level (a zone far above any load, keyed by $remote_addr, on a
# Redis of its own).  Prints the files whose results differ and exits 1 if
# a file fails with the module that passes without it, unless
# docs/nginx-compatibility.md explains it as timing (%TIMING below) or it
# passes when run again by itself (the load of the two runs side by side).
# Run by `./build.sh nginx-tests`:
#
#   NGINX_BIN=/usr/sbin/nginx \
#   RATELIMIT_MODULE=build/ngx_http_ratelimit_module.so \
#       perl -I t/lib t/compat/nginx_tests.pl
#
# Environment (all optional):
#   NGINX_BIN            the nginx to test (default /usr/sbin/nginx)
#   NGINX_TESTS          the suite's tarball (default: from ../shared/nginx,
#                        nginx-tests-for-1.22.tar.gz for nginx 1.22,
#                        nginx-tests-head.tar.gz for later ones)
#   TEST_NGINX_MODULES   its dynamic modules (default /usr/lib/nginx/modules
#                        for Debian's nginx, else beside the binary)
#   NGINX_TESTS_JOBS=2   prove's jobs
#   NGINX_TESTS_FILES    a space-separated subset of the suite's files
#   NGINX_TESTS_OUT      where the two runs' logs go (default
#                        build/nginx-tests/VERSION)

use strict;
use warnings;

use FindBin qw($Bin);
use lib "$Bin/../lib";
use Cwd qw(abs_path);
use File::Path qw(make_path);
use File::Temp qw(tempdir);
use POSIX ();
use RateLimitTest;

# Files that fail with the module for timing alone, and why (the reasons in
# full: docs/nginx-compatibility.md).
my %TIMING = (
    'limit_req_delay.t' =>
        'the wait for Redis adds to $request_time (X-Time: 0.000)',
    'grpc_request_buffering.t' =>
        'its client sends past the stream window while the request waits',
    'h2_request_body_preread.t' =>
        'its client sends past the stream window while the request waits',
);

my $nginx   = $ENV{NGINX_BIN} // '/usr/sbin/nginx';
my $module  = abs_path(RateLimitTest::module_path())
    // die "the module is not built (./build.sh)\n";
my $version = nginx_version($nginx);
my $repo    = RateLimitTest::repo_dir();
my $suite   = $ENV{NGINX_TESTS} // default_suite($version);
my $jobs    = $ENV{NGINX_TESTS_JOBS} // 2;
my $out     = $ENV{NGINX_TESTS_OUT} // "$repo/build/nginx-tests/$version";
my $modules = $ENV{TEST_NGINX_MODULES}
    // ($nginx eq '/usr/sbin/nginx' ? '/usr/lib/nginx/modules' : undef);

die "$suite not found\n" unless -f $suite;
make_path($out);

my $t = RateLimitTest->new;
$t->start_redis;
my $redis = $t->redis_port;

my $dir = tempdir('nginx-tests-XXXXXX', TMPDIR => 1, CLEANUP => 1);
system('tar', '-xzf', $suite, '-C', $dir) == 0 or die "cannot unpack $suite\n";
my ($tests) = grep { -d } glob("$dir/*");
my @files = $ENV{NGINX_TESTS_FILES}
    ? split(' ', $ENV{NGINX_TESTS_FILES}) : ('.');

print "nginx $version ($nginx), suite ", $suite =~ s{.*/}{}r, "\n";

# The two runs side by side: the suite waits more than it computes, and
# its ports are picked at random and locked, so they do not collide.
my $with_globals = "user root; load_module $module;";
my $with_http = "ratelimit_redis 127.0.0.1:$redis timeout=1s; "
    . 'ratelimit_zone nginx_tests key=$remote_addr limit=1000000000 '
    . 'window=60s; ratelimit zone=nginx_tests;';
my @runs = (start_suite('without', 'user root;', '', @files),
            start_suite('with', $with_globals, $with_http, @files));
my %without = finish_suite($runs[0]);
my %with = finish_suite($runs[1]);

my @only_with = grep { !$without{$_} } sort keys %with;
my @only_without = grep { !$with{$_} } sort keys %without;

# A file that failed with the module alone, unexplained, runs again with
# it, by itself: one that passes then failed for the load of the two runs
# side by side, not for the module.
my %again;
for my $file (grep { !$TIMING{$_} } @only_with) {
    my %failed = finish_suite(start_suite("with.again.$file", $with_globals,
                                          $with_http, $file));
    $again{$file} = $failed{$file} ? 'NOT EXPLAINED: failed again alone'
                                   : 'passed when run again alone (load)';
}
my @unexplained = grep { !$TIMING{$_} && $again{$_} =~ /^NOT/ } @only_with;

printf "failed without the module: %d files: %s\n", scalar keys %without,
    join(' ', sort keys %without) || '-';
printf "failed with the module only: %d files\n", scalar @only_with;
printf "  %s: %s\n", $_, $TIMING{$_} // $again{$_} for @only_with;
printf "failed without the module only: %s\n", join(' ', @only_without) || '-';
print "logs: $out/{without,with}.log\n";
print @unexplained ? "RESULT: FAIL\n" : "RESULT: PASS\n";

$t->stop_all;
exit(@unexplained ? 1 : 0);

# Starts one run of the suite in the background.
sub start_suite {
    my ($name, $globals, $http, @which) = @_;
    my $log = "$out/$name.log";
    my $pid = fork // die "fork: $!";

    if ($pid == 0) {
        $ENV{TEST_NGINX_BINARY} = $nginx;
        $ENV{TEST_NGINX_GLOBALS} = $globals;
        $ENV{TEST_NGINX_GLOBALS_HTTP} = $http;
        $ENV{TEST_NGINX_MODULES} = $modules if defined $modules;
        open(STDOUT, '>', $log) && open(STDERR, '>&', \*STDOUT)
            && chdir($tests) or POSIX::_exit(126);
        { no warnings 'exec'; exec('prove', "-j$jobs", '-r', @which) }
        POSIX::_exit(127);  # no END blocks: they belong to the parent
    }

    return { name => $name, pid => $pid, log => $log, started => time };
}

# Waits for a run: the files that failed (file => 1).  prove's own exit
# status says only that something failed; its summary says what: a file
# with a non-zero wait status, failed tests or parse errors failed, one
# listed for "TODO passed" alone did not.
sub finish_suite {
    my ($run) = @_;
    waitpid($run->{pid}, 0);

    my (%failed, $file);
    open my $fh, '<', $run->{log} or die "$run->{log}: $!";
    while (<$fh>) {
        if (m{^(?:\./)?(\S+\.t)\s+\(Wstat:\ (\d+)(?:\ \([^)]*\))?
              \ Tests:\ \d+\ Failed:\ (\d+)\)}x)
        {
            $file = $1;
            $failed{$file} = 1 if $2 != 0 || $3 > 0;
        } elsif (defined $file && /^\s+Parse errors:/) {
            $failed{$file} = 1;
        }
    }
    printf "%s the module: %d files failed, %d s\n", $run->{name},
        scalar keys %failed, time - $run->{started};
    return %failed;
}

sub nginx_version {
    my ($bin) = @_;
    my $v = `'$bin' -v 2>&1`;
    $v =~ m{nginx/(\d+\.\d+\.\d+)} or die "$bin -v: $v\n";
    return $1;
}

sub default_suite {
    my ($v) = @_;
    my ($major, $minor) = split /\./, $v;
    my $shared = "$repo/../shared/nginx";
    return $minor <= 22 && $major == 1
        ? "$shared/nginx-tests-for-1.22.tar.gz"
        : "$shared/nginx-tests-head.tar.gz";
}
