package RateLimitTest::Env;

# Where things are and how to run them: the repository, the module under
# test, the nginx and redis-server binaries, the Redis module, the clock
# shim, the slow-down factor (valgrind), and the small file helpers every
# other module uses.

use strict;
use warnings;

use Test::More ();
use File::Basename qw(dirname);
use File::Spec;
use File::Temp ();
use Cwd qw(abs_path);
use Exporter 'import';

our @EXPORT_OK = qw(repo_dir window_script slow module_path nginx_bin redis_bin
    redis_module_so clock_shim _module_args require_module _mkpath _write_file
    _read_file);

my $REPO = abs_path(File::Spec->catdir(dirname(abs_path(__FILE__)), '..', '..', '..'));

sub repo_dir { $REPO }

# The module's Redis script as it sends it: the text between R"lua( and
# )lua" in the C++ file the build writes from src/scripts/lua/, written
# here by the same src/scripts/lua/assemble.pl.
sub window_script {
    my $dir = "$REPO/src/scripts";
    my $out = File::Temp->new(SUFFIX => '.cpp');
    system($^X, "$dir/lua/assemble.pl", "$dir/lua", "$dir/../protocol/batch_protocol.hpp",
           $out->filename) == 0
        or die "$dir/lua/assemble.pl failed\n";
    _read_file($out->filename) =~ /R"lua\((.*?)\)lua"/s
        or die "no R\"lua( ... )lua\" script in $out\n";
    return $1;
}

# How many times longer than usual to wait for nginx.
sub slow { $ENV{RATELIMIT_SLOW} || 1 }

sub module_path {
    return $ENV{RATELIMIT_MODULE} // "$REPO/build/ngx_http_ratelimit_module.so";
}

sub nginx_bin { $ENV{NGINX_BIN} // '/usr/sbin/nginx' }

sub redis_bin {
    return $ENV{REDIS_BIN} if $ENV{REDIS_BIN};
    for my $d ((split /:/, ($ENV{PATH} // '')), '/usr/bin', '/usr/local/bin') {
        return "$d/redis-server" if -x "$d/redis-server";
    }
    return 'redis-server';
}

# The Redis module (redis_module/): RATELIMIT_REDIS_MODULE, else the one
# built beside the nginx module; undef if there is none.
sub redis_module_so {
    my $so = $ENV{RATELIMIT_REDIS_MODULE} || dirname(module_path()) . '/ratelimit_redis.so';
    return -f $so ? abs_path($so) : undef;
}

# The clock shim (t/lib/clock_shim.c): RATELIMIT_CLOCK_SHIM, else the one
# built beside the nginx module; absolute, for LD_PRELOAD.
sub clock_shim {
    my $so = $ENV{RATELIMIT_CLOCK_SHIM} || dirname(module_path()) . '/clock_shim.so';
    return -f $so ? abs_path($so) : $so;
}

# The arguments that make a redis-server load the Redis module, if `want`
# (default: if RATELIMIT_REDIS_MODULE is set).
sub _module_args {
    my ($want) = @_;
    $want //= $ENV{RATELIMIT_REDIS_MODULE} ? 1 : 0;
    return () unless $want;
    my $so = redis_module_so() or die "redis module not built (build/ratelimit_redis.so)\n";
    return ('--loadmodule', $so);
}

# Stop the whole run early (with a clear reason) when the module is missing.
sub require_module {
    my $m = module_path();
    Test::More::BAIL_OUT("ratelimit module not found at $m (build it or set RATELIMIT_MODULE)")
        unless -f $m;
    return $m;
}

sub _mkpath {
    my ($d) = @_;
    return if -d $d;
    _mkpath(dirname($d));
    mkdir $d or die "mkdir $d: $!";
    chmod 0755, $d;
}

sub _write_file {
    my ($path, $content) = @_;
    open my $fh, '>', $path or die "open $path: $!";
    binmode $fh;
    print {$fh} $content;
    close $fh or die "close $path: $!";
}

sub _read_file {
    my ($path) = @_;
    open my $fh, '<', $path or return '';
    binmode $fh;
    local $/;
    my $c = <$fh>;
    return $c // '';
}

1;
