#!/usr/bin/perl
# Benchmark of ngx_http_ratelimit_module against plain nginx, limit_req and
# an OpenResty (lua-resty-redis) peer.  Run by `./build.sh bench`:
#
#   RATELIMIT_MODULE=build/ngx_http_ratelimit_module.so perl -I t/lib bench/run.pl
#
# One nginx worker per case, one fresh redis-server on loopback, wrk with
# bench/keys.lua (10,000 subjects in X-Api-Key, keep-alive, 50 connections).
# The peer of the GCRA case, weserv's rate-limit-nginx-module and the Redis
# module it needs, is built for the run in a temporary folder from
# ../shared/peers/ (skipped with a note when absent or not building).
# Cases run round-robin, several rounds, so the noise shows.  Prints a
# Markdown report and writes it to bench/results.md.  Exits 0 whether the
# targets pass or not; non-zero if something could not run.
#
# Environment (all optional):
#   BENCH_ROUNDS=3        rounds over all cases
#   BENCH_SECONDS=6       seconds per case and round
#   BENCH_WARMUP=1        seconds of warm-up per case before the rounds
#   BENCH_THREADS=1       wrk threads
#   BENCH_CONNECTIONS=50  wrk connections
#   BENCH_UNIQUE=1000000  distinct subjects for the RSS check
#   BENCH_UNIQUE_SECONDS=70  time cap of the RSS check
#   BENCH_OUT=path        where to write the report (default bench/results.md)
#   BENCH_BASELINE_MODULE=path  another build of the module (before a
#                         change): every case of the module runs twice,
#                         CASE and CASE_base with that build, round-robin
#                         in the same rounds; a single Redis's baseline
#                         keys in its db 1, apart from this build's
#   BENCH_BASELINE_REDIS_MODULE=path  that build's Redis module: the
#                         baseline of the cases of the Redis module's
#                         command runs on a redis-server of its own with it
#   BENCH_PEERS=dir       the peers' tarballs (default ../shared/peers)
#   NGINX_SRC=dir         the nginx tree the peer's module is built against
#                         (default /usr/share/nginx/src, as build.sh)
#   BENCH_LATENCY=1       also an open-loop latency pass (issue 29): plain,
#                         limit_req, sliding, native and weserv (those of
#                         BENCH_CASES) at fixed offered loads, a fraction of
#                         plain's closed-loop req/s in this run, held by
#                         h2load (nghttp2-client) with 50 clients (--rps
#                         per client), each case's requests over the 10,000
#                         subjects in ?key= (its own nginx, keyed by
#                         $arg_key); PINGs timed by bench/ping.pl beside it
#   BENCH_LATENCY_LOADS=0.25,0.5,0.75  the offered loads (x plain)
#   BENCH_LATENCY_SECONDS=5  seconds per case and load
#   BENCH_LATENCY_PROCS=10   h2load processes sharing the clients, each
#                         walking the subjects from its own offset
#   BENCH_LATENCY_PINGS=1000 PINGs per case and load

use strict;
use warnings;

use FindBin qw($Bin);
use lib "$Bin/../t/lib";
use RateLimitTest qw(percentile);
use TestCerts;
use ClusterTest;
use Digest::SHA qw(sha1_hex);
use File::Temp qw(tempdir);
use JSON::PP ();
use POSIX qw(strftime floor);
use Time::HiRes qw(time sleep);

$| = 1;

my $ROUNDS      = $ENV{BENCH_ROUNDS}      // 3;
my $SECONDS     = $ENV{BENCH_SECONDS}     // 6;
my $WARMUP      = $ENV{BENCH_WARMUP}      // 1;
my $THREADS     = $ENV{BENCH_THREADS}     // 1;
my $CONNS       = $ENV{BENCH_CONNECTIONS} // 50;
my $UNIQUE      = $ENV{BENCH_UNIQUE}      // 1_000_000;
my $UNIQUE_SECS = $ENV{BENCH_UNIQUE_SECONDS} // 70;
my $OUT         = $ENV{BENCH_OUT}         // "$Bin/results.md";
# comma-separated case ids to run (default: all); a short run for one
# question, e.g. BENCH_CASES=plain,sliding,native BENCH_UNIQUE=0
my %ONLY        = map { $_ => 1 } split /,/, ($ENV{BENCH_CASES} // '');
my $SUBJECTS    = 10_000;
my $BIG_LIMIT   = 1_000_000;
my $FLOOD_LIMIT = 100;
# Leases near the limit: a subject's requests in a round (10,000 subjects
# share some 100,000 requests) pass it.
my $NEAR_LIMIT = 5;
# The GCRA zone and its peer: a rate per subject far above what one subject
# gets here (10,000 subjects share the load), so nothing waits or is rejected.
my $GCRA_RATE   = 10_000;
my $GCRA_BURST  = 1_000;

# the open-loop latency pass (BENCH_LATENCY=1)
my $LATENCY       = $ENV{BENCH_LATENCY} // 0;
my @LAT_LOADS     = split /,/, ($ENV{BENCH_LATENCY_LOADS} // '0.25,0.5,0.75');
my $LAT_OPEN_SECS = $ENV{BENCH_LATENCY_SECONDS} // 5;
my $LAT_CLIENTS   = 50;
my $LAT_PROCS     = $ENV{BENCH_LATENCY_PROCS} // 10;
my $LAT_PINGS     = $ENV{BENCH_LATENCY_PINGS} // 1000;
my @LAT_IDS       = qw(plain limit_req sliding native weserv);

my $LUA_MODULES = '/usr/lib/nginx/modules';
my $T0 = time;

sub note { printf STDERR "[bench %5.1fs] %s\n", time - $T0, join('', @_) }

# ---------------------------------------------------------------------------
# prerequisites

use Cwd qw(abs_path);
$ENV{RATELIMIT_MODULE} = abs_path($ENV{RATELIMIT_MODULE})
    if $ENV{RATELIMIT_MODULE} && -f $ENV{RATELIMIT_MODULE};
my $module = RateLimitTest::module_path();
die "ratelimit module not found at $module (run ./build.sh first)\n" unless -f $module;
my $wrk = find_bin('wrk') or die "wrk not found (apt-get install wrk)\n";
for my $so ("$LUA_MODULES/ndk_http_module.so", "$LUA_MODULES/ngx_http_lua_module.so") {
    die "$so not found (apt-get install libnginx-mod-http-lua)\n" unless -f $so;
}
my ($resty_redis) = grep { -f } map { "$_/redis.lua" }
    '/usr/share/lua/5.1/resty', '/usr/share/lua/5.1/nginx', '/usr/local/share/lua/5.1/resty';
die "lua-resty-redis not found (apt-get install lua-nginx-redis)\n" unless $resty_redis;
my $h2load;
if ($LATENCY) {
    $h2load = find_bin('h2load') or die "h2load not found (apt-get install nghttp2-client)\n";
    die "$Bin/ping.pl missing\n" unless -f "$Bin/ping.pl";
    die "BENCH_LATENCY_PROCS must divide the $LAT_CLIENTS clients\n"
        unless $LAT_PROCS >= 1 && $LAT_CLIENTS % $LAT_PROCS == 0;
}
for my $f (qw(keys.lua unique.lua openresty_peer.lua)) {
    die "$Bin/$f missing\n" unless -f "$Bin/$f";
}

my $SCRIPT = RateLimitTest::window_script();
my $SCRIPT_SHA = sha1_hex($SCRIPT);

sub find_bin {
    my ($name) = @_;
    for my $d ((split /:/, $ENV{PATH} // ''), '/usr/bin', '/usr/local/bin', '/usr/sbin') {
        return "$d/$name" if -x "$d/$name";
    }
    return undef;
}

sub slurp {
    my ($path) = @_;
    open my $fh, '<', $path or die "open $path: $!\n";
    local $/;
    my $c = <$fh>;
    return $c;
}

sub spew {
    my ($path, $content) = @_;
    open my $fh, '>', $path or die "open $path: $!\n";
    print {$fh} $content;
    close $fh or die "close $path: $!\n";
    chmod 0644, $path;
}

# The script's call convention (src/scripts/window_script.hpp) for a batch of one
# request in one zone: 1 zone, its limit, bucket length in ms, buckets, "s"
# for sliding, "1" to enforce; then the request, "c" to count and the byte
# 0 for that zone.
# A Lua string literal of any bytes.
sub lua_string {
    my ($s) = @_;
    $s =~ s/([^\x20-\x7e]|["\\])/sprintf('\\%03d', ord $1)/ge;
    return "\"$s\"";
}

sub script_args {
    my ($limit, $bucket_ms, $buckets) = @_;
    return (1, $limit, $bucket_ms, $buckets, 's', '1', "c\0");
}

# ---------------------------------------------------------------------------
# machine

my $nproc = `nproc 2>/dev/null` // '';
chomp $nproc;
my ($cpu_model) = slurp('/proc/cpuinfo') =~ /^model name\s*:\s*(.*)$/m;
$cpu_model //= 'unknown CPU';
my $nginx_version = `${\ RateLimitTest::nginx_bin()} -v 2>&1`;
($nginx_version) = $nginx_version =~ m{nginx/(\S+)};
$nginx_version //= '?';
my ($wrk_version) = (`$wrk -v 2>&1` // '') =~ /wrk (\S+)/;
$wrk_version //= '?';
my $lua_version = `dpkg-query -W -f='\${Version}' libnginx-mod-http-lua 2>/dev/null` || '?';
my $resty_version = (slurp($resty_redis) =~ /_VERSION\s*=\s*'([^']+)'/)[0] // '?';

# ---------------------------------------------------------------------------
# redis

note "starting redis-server (TCP, and TLS on a second port)";
my $rt = RateLimitTest->new(workers => 1);
my $PKI = TestCerts->new($rt->tmp . '/pki');
my $TLS_PORT = $rt->port('TLS_PORT');
# The script's cases: never the Redis module, whatever
# RATELIMIT_REDIS_MODULE says (with it, nginx would run the command there).
$rt->start_redis(redis_module => 0, args => [$PKI->redis_tls_args($TLS_PORT)]);
my $RPORT = $rt->redis_port;
note "starting a Redis Cluster of 3 masters";
my $CLUSTER = ClusterTest->new($rt, masters => 3, replicas => 0, node_timeout => 2000,
    redis_module => { 1 => 0, 2 => 0, 3 => 0 });
$CLUSTER->start(30) or die "the bench's Redis Cluster did not come up\n";
my @CLUSTER_MASTERS = map { $_->{port} } $CLUSTER->masters;
my $redis_version = ($rt->redis('INFO', 'server') =~ /^redis_version:(\S+)/m)[0] // '?';

# A second redis-server, with the Redis module loaded: the cases that use
# its command instead of the script.
note "starting redis-server with the Redis module";
my $rt_module = RateLimitTest->new(workers => 1);
$rt_module->start_redis(redis_module => 1);
my $MODULE_RPORT = $rt_module->redis_port;
note "starting a Redis Cluster of 3 masters with the Redis module";
my $MODULE_CLUSTER = ClusterTest->new($rt_module, masters => 3, replicas => 0, node_timeout => 2000,
    redis_module => { 1 => 1, 2 => 1, 3 => 1 });
$MODULE_CLUSTER->start(30) or die "the bench's Redis Cluster with the module did not come up\n";
my @MODULE_CLUSTER_MASTERS = map { $_->{port} } $MODULE_CLUSTER->masters;

# The baseline build's Redis module, on a redis-server of its own: the two
# releases' modules name one command.
my ($rt_base_module, $BASE_MODULE_RPORT);
if (my $so = $ENV{BENCH_BASELINE_REDIS_MODULE}) {
    $so = abs_path($so) // die "$ENV{BENCH_BASELINE_REDIS_MODULE} not found\n";
    note "starting redis-server with the baseline's Redis module";
    $rt_base_module = RateLimitTest->new(workers => 1);
    $rt_base_module->start_redis(redis_module => 0, args => ['--loadmodule', $so]);
    $BASE_MODULE_RPORT = $rt_base_module->redis_port;
}

# ---------------------------------------------------------------------------
# The GCRA case's peer: weserv's rate-limit-nginx-module, whose GCRA is
# onsigntv's redis-rate-limiter, a Redis module (RATER.LIMIT).  Their sources
# are not the project's: the bench builds them for this run only, in a
# temporary folder, from the tarballs in ../shared/peers/ (SOURCES names
# their commits): the nginx module as a dynamic module against the nginx
# tree the project builds against (as build.sh's build_module does), the
# Redis module with its Makefile, loaded by a redis-server of its own.
# Tarballs absent or a build failing: the case is skipped with a note.

my $PEERS = $ENV{BENCH_PEERS} // abs_path("$Bin/../..") . '/shared/peers';
my @SKIPPED;    # report notes on cases that could not run

# Runs @cmd in $cwd, its output to $log; dies with the log's last lines.
sub run_logged {
    my ($cwd, $log, @cmd) = @_;
    my $pid = fork // die "fork: $!\n";
    if (!$pid) {
        chdir $cwd or POSIX::_exit(126);
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', $log or POSIX::_exit(126);
        open STDERR, '>&', \*STDOUT or POSIX::_exit(126);
        no warnings 'exec';
        exec { $cmd[0] } @cmd;
        POSIX::_exit(127);
    }
    waitpid $pid, 0;
    return if $? == 0;
    my @l = split /\n/, (eval { slurp($log) } // '');
    @l = @l[-3 .. -1] if @l > 3;
    die "`@cmd[0 .. ($#cmd < 2 ? $#cmd : 2)] ...` failed (status " . ($? >> 8) . "): "
        . join(' | ', @l) . "\n";
}

sub build_weserv {
    my %tb = map { $_ => "$PEERS/$_.tar.gz" } qw(rate-limit-nginx-module redis-rate-limiter);
    for (sort values %tb) { die "$_ not found\n" unless -f $_ }
    my $src = $ENV{NGINX_SRC} // '/usr/share/nginx/src';
    die "no nginx source tree at $src (apt-get install nginx-dev)\n" unless -x "$src/configure";
    my $dir = tempdir('rlbench-peers-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    for my $name (sort keys %tb) {
        run_logged($dir, "$dir/tar.log", 'tar', '-xzf', $tb{$name});
        die "$tb{$name} holds no $name/ folder\n" unless -d "$dir/$name";
    }
    # the flags Debian's nginx was configured with, as build.sh takes them
    my @flags = ('--with-compat');
    if (-f "$src/conf_flags") {
        open my $fh, '-|', 'bash', '-c', '. "$1" && printf "%s\0" "${NGX_CONF_FLAGS[@]}"',
            'bash', "$src/conf_flags" or die "conf_flags: $!\n";
        local $/;
        my @f = split /\0/, <$fh> // '';
        close $fh;
        @flags = @f if @f;
        push @flags, '--with-compat' unless grep { $_ eq '--with-compat' } @flags;
    }
    note "building weserv's nginx module against $src in $dir";
    run_logged($dir, "$dir/cp.log", 'cp', '-a', $src, "$dir/nginx");
    run_logged("$dir/nginx", "$dir/configure.log", './configure', @flags,
        '--with-cc-opt=-O2 -g', "--add-dynamic-module=$dir/rate-limit-nginx-module");
    run_logged("$dir/nginx", "$dir/make.log", 'make', '-f', 'objs/Makefile', 'modules');
    my $so = "$dir/nginx/objs/ngx_http_rate_limit_module.so";
    die "no $so after make\n" unless -f $so;
    note "building redis-rate-limiter (its Makefile)";
    run_logged("$dir/redis-rate-limiter", "$dir/redis-make.log", 'make');
    my $rso = "$dir/redis-rate-limiter/ratelimit.so";
    die "no $rso after make\n" unless -f $rso;
    my $sources = -f "$PEERS/SOURCES" ? slurp("$PEERS/SOURCES") : '';
    my @commits = map { $sources =~ /^\Q$_\E\s+([0-9a-f]{7})/m ? "$_ $1" : "$_ (commit not in SOURCES)" }
        sort keys %tb;
    return { dir => $dir, so => $so, redis_so => $rso, commits => join(', ', @commits) };
}

my ($WESERV, $rt_weserv, $WESERV_RPORT);
if (!%ONLY || $ONLY{weserv}) {
    $WESERV = eval { build_weserv() };
    if ($WESERV) {
        note "starting redis-server with redis-rate-limiter";
        $rt_weserv = RateLimitTest->new(workers => 1);
        if (eval { $rt_weserv->start_redis(redis_module => 0, args => ['--loadmodule', $WESERV->{redis_so}]); 1 }) {
            $WESERV_RPORT = $rt_weserv->redis_port;
        } else {
            push @SKIPPED, "weserv: skipped, its Redis module did not load: " . (split /\n/, $@)[-1];
            ($WESERV, $rt_weserv) = ();
        }
    } else {
        push @SKIPPED, "weserv: skipped, the peer could not be built from $PEERS: " . ($@ =~ s/\s+\z//r);
    }
}

sub rcmd { rcmd_at($rt, @_) }

sub rcmd_at {
    my ($at, @argv) = @_;
    my $r = $at->redis(@argv);
    die "redis @argv[0..($#argv < 1 ? $#argv : 1)]: $$r\n" if RateLimitTest::is_redis_error($r);
    return $r;
}

# Commands of this script's own connection, left out of the per-request sums.
my %ADMIN = map { $_ => 1 } qw(info ping memory scan hlen dbsize config flushall
    flushdb select client command hello auth);
# Top-level commands when the limiter runs a script; the rest were called from
# inside the script (Redis counts those too, and their usec again inside
# EVALSHA's), so they are counted as calls but not as time.  The Redis
# module's command calls none.
my %SCRIPT_CMD = map { $_ => 1 } qw(evalsha eval evalsha_ro eval_ro script|load script
    ratelimit.decide);

# Command and CPU counters of a case's Redis: the bench's, the case's own
# (`redis`, a RateLimitTest that runs another), or summed over the masters
# of a cluster case (`redis_nodes`, their plain ports).
sub redis_snapshot {
    my ($c) = @_;
    my %s = (cpu => 0);
    my @nodes = $c->{redis_nodes}
        ? map { my $p = $_; sub { RateLimitTest::redis_at({ port => $p }, @_) } } @{ $c->{redis_nodes} }
        : (sub { rcmd_at($c->{redis} // $rt, @_) });
    for my $node (@nodes) {
        my $stats = $node->('INFO', 'commandstats');
        while ($stats =~ /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/mg) {
            my $e = $s{cmd}{$1} //= [0, 0];
            $e->[0] += $2;
            $e->[1] += $3;
        }
        my $cpu = $node->('INFO', 'cpu');
        my ($sys)  = $cpu =~ /^used_cpu_sys:([\d.]+)/m;
        my ($user) = $cpu =~ /^used_cpu_user:([\d.]+)/m;
        $s{cpu} += ($sys // 0) + ($user // 0);
    }
    return \%s;
}

sub redis_delta {
    my ($x, $y) = @_;
    my (%calls, %usec);
    for my $c (keys %{ $y->{cmd} }) {
        next if $ADMIN{ (split /\|/, $c)[0] };
        my $pa = $x->{cmd}{$c} // [0, 0];
        my $dc = $y->{cmd}{$c}[0] - $pa->[0];
        my $du = $y->{cmd}{$c}[1] - $pa->[1];
        next unless $dc > 0;
        $calls{$c} = $dc;
        $usec{$c}  = $du;
    }
    my $scripted = grep { $SCRIPT_CMD{$_} } keys %calls;
    my ($all, $top, $us) = (0, 0, 0);
    for my $c (keys %calls) {
        $all += $calls{$c};
        if (!$scripted || $SCRIPT_CMD{$c}) {
            $top += $calls{$c};
            $us  += $usec{$c};
        }
    }
    return {
        calls => $all, top_calls => $top, usec => $us,
        cpu_us => ($y->{cpu} - $x->{cpu}) * 1e6,
        detail => join(' ', map { "$_=$calls{$_}" } sort { $calls{$b} <=> $calls{$a} } keys %calls),
    };
}

# utime+stime of a process in microseconds (from /proc/PID/stat).
my $CLK_TCK = eval { POSIX::sysconf(POSIX::_SC_CLK_TCK()) } || 100;

sub proc_cpu {
    my ($pid) = @_;
    return 0 unless $pid;
    open my $fh, '<', "/proc/$pid/stat" or return 0;
    my $st = <$fh>;
    $st =~ s/^.*\)\s+//s;
    my @f = split ' ', $st;
    return ($f[11] + $f[12]) / $CLK_TCK * 1e6;
}

sub worker_pid {
    my ($master) = @_;
    opendir my $d, '/proc' or return undef;
    for my $p (grep { /^\d+$/ } readdir $d) {
        open my $fh, '<', "/proc/$p/stat" or next;
        my $st = <$fh> // next;
        next unless $st =~ /^\d+ \((.*)\) \S+ (\d+)/s;
        return $p if $2 == $master;
    }
    return undef;
}

sub rss_kb {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/status" or return undef;
    while (<$fh>) { return $1 if /^VmRSS:\s+(\d+)\s+kB/ }
    return undef;
}

# ---------------------------------------------------------------------------
# nginx instances, one per case

sub lua_config {
    my ($t, %o) = @_;
    my $level = 1;
    $level++ while index($SCRIPT, ']' . ('=' x $level) . ']') >= 0;
    my $eq = '=' x $level;
    my @args = script_args($o{limit}, 1000, 60);
    my $cfg = "-- generated by bench/run.pl\nreturn {\n"
        . "    port = $RPORT,\n    timeout_ms = 1000,\n"
        . "    idle_ms = 60000,\n    pool_size = 128,\n"
        . "    prefix = \"$o{prefix}\",\n"
        . "    limit = $o{limit},\n    bucket_ms = 1000,\n    buckets = 60,\n"
        . "    window_s = 60,\n"
        . "    args = {" . join(', ', map { lua_string($_) } @args) . "},\n"
        . "    sha = \"$SCRIPT_SHA\",\n"
        # a long bracket drops the newline right after it: add one
        . "    script = [${eq}[\n$SCRIPT]${eq}],\n}\n";
    spew($t->tmp . '/rlbench_cfg.lua', $cfg);
    spew($t->tmp . '/openresty_peer.lua', slurp("$Bin/openresty_peer.lua"));
}

my $LUA_MAIN = "load_module $LUA_MODULES/ndk_http_module.so;\n"
             . "load_module $LUA_MODULES/ngx_http_lua_module.so;";

# $extra: more locations of the server (the metrics endpoint).
sub server_block {
    my ($loc, $extra) = @_;
    $extra //= '';
    return <<"EOF";
    server {
        listen 127.0.0.1:%%PORT%% backlog=4096;
        access_log off;
        keepalive_requests 1000000;
        root %%TMP%%/html;
        location / {
$loc
        }
$extra
    }
EOF
}

# The script and its call convention as this bench understood them: a fresh
# key counted twice must report a count of 2 (and SCRIPT LOAD must agree on
# the SHA-1).
{
    my $sha = rcmd('SCRIPT', 'LOAD', $SCRIPT);
    die "SCRIPT LOAD gave $sha, expected $SCRIPT_SHA\n" unless $sha eq $SCRIPT_SHA;
    my @args = script_args(1000, 1000, 60);
    my $r;
    $r = rcmd('EVALSHA', $sha, 1, 'bench:check', @args) for 1 .. 2;
    # The flat reply: Redis time, then rejected, count, oldest, over.
    die "the script did not count as expected with (@args)\n"
        unless ref $r && @$r == 5 && $r->[1] == 0 && $r->[2] == 2;
    rcmd('DEL', 'bench:check');
    rcmd('SCRIPT', 'FLUSH');    # the limiters load it themselves
}

my $REDIS_LINE = "    ratelimit_redis 127.0.0.1:$RPORT timeout=1s;\n";
my $MODULE_REDIS_LINE = "    ratelimit_redis 127.0.0.1:$MODULE_RPORT timeout=1s;\n";

my @CASES = (
    {
        id => 'plain', label => '1. plain nginx (static file)', no_module => 1,
        loc => '',
    },
    {
        id => 'limit_req', label => '2. limit_req (local zone, same key)', no_module => 1,
        http => "    limit_req_zone \$http_x_api_key zone=lr:32m rate=1000000r/s;\n",
        loc => '            limit_req zone=lr burst=1000000 nodelay;',
    },
    {
        id => 'sliding', label => '3. module sliding 60s/1s buckets', limiter => 1,
        http => $REDIS_LINE
            . "    ratelimit_zone z60 key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s top=off;\n",
        loc => '            ratelimit zone=z60;',
    },
    {
        # the same zone keeping its top subjects (issue 45): each request
        # counted in the server's shared memory under its lock, each slice
        # flushed to Redis by one worker
        id => 'sliding_top', label => '3tk. module sliding 60s/1s, top=32', limiter => 1,
        http => $REDIS_LINE
            . "    ratelimit_zone z60t key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s top=32;\n",
        loc => '            ratelimit zone=z60t;',
    },
    {
        # the same zone where a status location has override=on (issue
        # 41), no override set: each call checks the zone's marker
        id => 'sliding_side', label => '3o. module sliding 60s/1s, override=on, no override set', limiter => 1,
        http => $REDIS_LINE
            . "    ratelimit_zone z60o key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s;\n",
        loc => '            ratelimit zone=z60o;',
        extra => '        location = /q { ratelimit_query zone=z60o override=on; }',
    },
    {
        # the same zone banning for an hour (issue 43), no ban in force
        # (the limit is never reached): each call checks the zone's marker
        id => 'sliding_ban', label => '3b. module sliding 60s/1s, ban=1h, no ban in force', limiter => 1,
        http => $REDIS_LINE
            . "    ratelimit_zone z60b key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s ban=1h;\n",
        loc => '            ratelimit zone=z60b;',
    },
    {
        # the same zone, its limit from a map on the key (every key gets
        # the same limit: only the per-request evaluation differs)
        id => 'sliding_var', label => '3v. module sliding 60s/1s, limit=$variable from a map', limiter => 1,
        http => $REDIS_LINE
            . "    map \$http_x_api_key \$plan_limit {\n"
            . "        gold $BIG_LIMIT;\n        silver $BIG_LIMIT;\n        default $BIG_LIMIT;\n    }\n"
            . "    ratelimit_zone z60v key=\$http_x_api_key limit=\$plan_limit window=60s bucket=1s;\n",
        loc => '            ratelimit zone=z60v;',
    },
    {
        # the same zone, each request costing 2 units (a "w" entry)
        id => 'sliding_cost', label => '3k. module sliding 60s/1s, cost=2', limiter => 1,
        http => $REDIS_LINE
            . "    ratelimit_zone z60k key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s;\n",
        loc => '            ratelimit zone=z60k cost=2;',
    },
    {
        # the same, its limit and its cost each from a map on the key
        id => 'sliding_cost_var', label => '3kv. module sliding 60s/1s, limit=$variable and cost=$variable from maps', limiter => 1,
        http => $REDIS_LINE
            . "    map \$http_x_api_key \$plan_limit {\n"
            . "        gold $BIG_LIMIT;\n        silver $BIG_LIMIT;\n        default $BIG_LIMIT;\n    }\n"
            . "    map \$http_x_api_key \$plan_cost {\n"
            . "        gold 2;\n        silver 2;\n        default 2;\n    }\n"
            . "    ratelimit_zone z60kv key=\$http_x_api_key limit=\$plan_limit window=60s bucket=1s;\n",
        loc => '            ratelimit zone=z60kv cost=$plan_cost;',
    },
    {
        # the sliding zone, every request settled at the log phase by one
        # more unit than it reserved: a settle per request, riding the
        # batches
        id => 'sliding_settle', label => '3s. module sliding 60s/1s, a settle on every request', limiter => 1,
        http => $REDIS_LINE
            . "    ratelimit_zone z60s key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s;\n",
        loc => "            ratelimit zone=z60s;\n            ratelimit_settle zone=z60s 2;",
    },
    {
        # the same zone over TLS, to the same Redis's TLS port
        id => 'sliding_tls', label => '3t. module sliding 60s/1s buckets over TLS', limiter => 1,
        http => "    ratelimit_redis 127.0.0.1:$TLS_PORT timeout=1s;\n"
            . "    ratelimit_redis_ssl on;\n"
            . "    ratelimit_redis_ssl_trusted_certificate $PKI->{ca};\n"
            . "    ratelimit_zone z60 key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s;\n",
        loc => '            ratelimit zone=z60;',
    },
    {
        # the same zone on keys of its own, with a metrics location: every
        # request recorded in shared memory
        id => 'sliding_metrics', label => '3m. module sliding 60s/1s, metrics on', limiter => 1,
        http => $REDIS_LINE
            . "    ratelimit_zone z60m key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s;\n",
        loc => '            ratelimit zone=z60m;',
        extra => '        location = /metrics { ratelimit_metrics; }',
    },
    {
        # the same zone on a cluster of 3 masters, on this same machine
        id => 'sliding_cluster', label => '3c. module sliding 60s/1s buckets, Redis Cluster of 3 masters', limiter => 1,
        redis_nodes => \@CLUSTER_MASTERS,
        http => "    ratelimit_redis cluster " . $CLUSTER->seeds . " timeout=1s;\n"
            . "    ratelimit_zone z60 key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s;\n",
        loc => '            ratelimit zone=z60;',
    },
    {
        id => 'sliding_cross', label => '3x. module sliding 60s/1s buckets, Redis Cluster, cross_slot', limiter => 1,
        redis_nodes => \@CLUSTER_MASTERS,
        http => "    ratelimit_redis cluster " . $CLUSTER->seeds . " cross_slot timeout=1s;\n"
            . "    ratelimit_zone z60 key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s;\n",
        loc => '            ratelimit zone=z60;',
    },
    {
        # the same at 3 times the connections: each master's share of the
        # requests in flight is then one Redis's at $CONNS, as for a
        # cluster of 3 sized for 3 times the load of one Redis
        id => 'sliding_cross3', label => "3x3. module sliding 60s/1s buckets, Redis Cluster, cross_slot, @{[ 3 * $CONNS ]} connections",
        limiter => 1, conns => 3 * $CONNS,
        redis_nodes => \@CLUSTER_MASTERS,
        http => "    ratelimit_redis cluster " . $CLUSTER->seeds . " cross_slot timeout=1s;\n"
            . "    ratelimit_zone z60 key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s;\n",
        loc => '            ratelimit zone=z60;',
    },
    {
        id => 'sliding1h', label => '3b. module sliding 1h/1s buckets', limiter => 1,
        http => $REDIS_LINE
            . "    ratelimit_zone z1h key=\$http_x_api_key limit=$BIG_LIMIT window=1h bucket=1s;\n",
        loc => '            ratelimit zone=z1h;',
    },
    {
        id => 'fixed', label => '4. module fixed 60s', limiter => 1,
        http => $REDIS_LINE
            . "    ratelimit_zone zfx key=\$http_x_api_key limit=$BIG_LIMIT window=60s algorithm=fixed;\n",
        loc => '            ratelimit zone=zfx;',
    },
    {
        # the same as a calendar zone (issue 42): a day in Berlin, its
        # periods made per call
        id => 'fixed_cal', label => '4c. module calendar window=day tz=Europe/Berlin', limiter => 1,
        http => $REDIS_LINE
            . "    ratelimit_zone zcal key=\$http_x_api_key limit=$BIG_LIMIT window=day tz=Europe/Berlin;\n",
        loc => '            ratelimit zone=zcal;',
    },
    {
        # the sliding and fixed zones on the Redis with the Redis module:
        # its command in place of the script
        id => 'native', label => '3n. module sliding 60s/1s, Redis module command', limiter => 1,
        redis => $rt_module,
        http => $MODULE_REDIS_LINE
            . "    ratelimit_zone z60 key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s;\n",
        loc => '            ratelimit zone=z60;',
    },
    {
        # the same, override=on and no override set (issue 41)
        id => 'native_side', label => '3no. module sliding 60s/1s, Redis module command, override=on, no override set', limiter => 1,
        redis => $rt_module,
        http => $MODULE_REDIS_LINE
            . "    ratelimit_zone z60o key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s;\n",
        loc => '            ratelimit zone=z60o;',
        extra => '        location = /q { ratelimit_query zone=z60o override=on; }',
    },
    {
        # the same, ban=1h and no ban in force (issue 43)
        id => 'native_ban', label => '3nb. module sliding 60s/1s, Redis module command, ban=1h, no ban in force', limiter => 1,
        redis => $rt_module,
        http => $MODULE_REDIS_LINE
            . "    ratelimit_zone z60b key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s ban=1h;\n",
        loc => '            ratelimit zone=z60b;',
    },
    {
        # the same on a cluster of 3 masters that have the module: one
        # call per slot, each node's connection using its command
        id => 'native_cluster', label => '3nc. module sliding 60s/1s, Redis module command, Redis Cluster of 3 masters', limiter => 1,
        redis_nodes => \@MODULE_CLUSTER_MASTERS,
        http => "    ratelimit_redis cluster " . $MODULE_CLUSTER->seeds . " timeout=1s;\n"
            . "    ratelimit_zone z60 key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s;\n",
        loc => '            ratelimit zone=z60;',
    },
    {
        id => 'native_fixed', label => '4n. module fixed 60s, Redis module command', limiter => 1,
        redis => $rt_module,
        http => $MODULE_REDIS_LINE
            . "    ratelimit_zone zfx key=\$http_x_api_key limit=$BIG_LIMIT window=60s algorithm=fixed;\n",
        loc => '            ratelimit zone=zfx;',
    },
    {
        id => 'lua_sliding', label => '5. OpenResty sliding (same script, EVALSHA)', limiter => 1,
        lua => { prefix => 'rl:lua:', limit => $BIG_LIMIT },
        loc => '            access_by_lua_block { require("openresty_peer").sliding() }',
    },
    {
        id => 'lua_fixed', label => '6. OpenResty fixed (INCR+EXPIRE pipelined)', limiter => 1,
        lua => { prefix => 'rl:luaf:', limit => $BIG_LIMIT },
        loc => '            access_by_lua_block { require("openresty_peer").fixed() }',
    },
    {
        # GCRA, limit_req's nodelay: the TAT of a subject read and written
        # per request by the script
        id => 'gcra', label => "8. module GCRA ${GCRA_RATE}r/s burst=$GCRA_BURST nodelay", limiter => 1,
        http => $REDIS_LINE
            . "    ratelimit_zone zg key=\$http_x_api_key rate=${GCRA_RATE}r/s algorithm=gcra;\n",
        loc => "            ratelimit zone=zg burst=$GCRA_BURST nodelay;",
    },
    {
        # the same, decided by the Redis module's command
        id => 'native_gcra', label => "8n. module GCRA ${GCRA_RATE}r/s burst=$GCRA_BURST nodelay, Redis module command", limiter => 1,
        redis => $rt_module,
        http => $MODULE_REDIS_LINE
            . "    ratelimit_zone zg key=\$http_x_api_key rate=${GCRA_RATE}r/s algorithm=gcra;\n",
        loc => "            ratelimit zone=zg burst=$GCRA_BURST nodelay;",
    },
    ($WESERV ? {
        # its peer, configured as its README's synopsis: its own Redis (with
        # redis-rate-limiter) behind an upstream with a keepalive pool, the
        # same rate and burst (period in seconds)
        id => 'weserv', label => '9. weserv rate-limit-nginx-module (GCRA in its Redis module)', limiter => 1,
        no_module => 1, peer => 1, redis => $rt_weserv,
        load => "load_module $WESERV->{so};",
        http => "    upstream wsv_redis {\n        server 127.0.0.1:$WESERV_RPORT;\n        keepalive 1024;\n    }\n",
        loc => "            rate_limit \$http_x_api_key requests=$GCRA_RATE period=1s burst=$GCRA_BURST;\n"
            . "            rate_limit_pass wsv_redis;",
    } : ()),
    {
        # quota leases (issue 28): one hot subject (a whole service) far
        # from its limit, leased and exact; the 10,000 subjects leased;
        # and near the limit (NEAR_LIMIT a window: the subjects reach it
        # within a round), leased and exact.  Each case its own zone name,
        # so that no two share counts in the one Redis.
        id => 'lease_hot', label => '10. module sliding, lease=1m, 1 subject, limit far above the load', limiter => 1,
        subjects => 1, key_prefix => 'hot',
        http => $REDIS_LINE
            . "    ratelimit_zone zh key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s lease=1m;\n",
        loc => '            ratelimit zone=zh;',
    },
    {
        id => 'exact_hot', label => '10e. module sliding, exact, 1 subject, limit far above the load', limiter => 1,
        subjects => 1, key_prefix => 'hot',
        http => $REDIS_LINE
            . "    ratelimit_zone zhe key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s;\n",
        loc => '            ratelimit zone=zhe;',
    },
    {
        id => 'lease', label => '11. module sliding 60s/1s, lease=8m', limiter => 1,
        http => $REDIS_LINE
            . "    ratelimit_zone zl key=\$http_x_api_key limit=$BIG_LIMIT window=60s bucket=1s lease=8m;\n",
        loc => '            ratelimit zone=zl;',
    },
    {
        id => 'lease_near', label => "12. module sliding 60s/1s, lease=8m, limit $NEAR_LIMIT (reached)", limiter => 1,
        http => $REDIS_LINE
            . "    ratelimit_zone zn key=\$http_x_api_key limit=$NEAR_LIMIT window=60s bucket=1s lease=8m;\n",
        loc => "            ratelimit zone=zn;\n            ratelimit_log_level info;",
    },
    {
        id => 'exact_near', label => "12e. module sliding 60s/1s, exact, limit $NEAR_LIMIT (reached)", limiter => 1,
        http => $REDIS_LINE
            . "    ratelimit_zone zne key=\$http_x_api_key limit=$NEAR_LIMIT window=60s bucket=1s;\n",
        loc => "            ratelimit zone=zne;\n            ratelimit_log_level info;",
    },
    {
        id => 'flood', label => "7. flood: module, 1 subject, limit $FLOOD_LIMIT/60s", limiter => 1,
        subjects => 1, key_prefix => 'flood',
        http => $REDIS_LINE
            . "    ratelimit_zone zfl key=\$http_x_api_key limit=$FLOOD_LIMIT window=60s bucket=1s;\n",
        # rejections are logged at "info", below error_log's "notice", so the
        # flood measures the limiter, not error.log writes (limit_req's
        # limit_req_log_level works the same way)
        loc => "            ratelimit zone=zfl;\n            ratelimit_log_level info;",
    },
);
@CASES = grep { $ONLY{ $_->{id} } } @CASES if %ONLY;
if (my $base = $ENV{BENCH_BASELINE_MODULE}) {
    $base = abs_path($base) // die "$ENV{BENCH_BASELINE_MODULE} not found\n";
    @CASES = map {
        $_->{no_module} || $_->{lua} || $_->{peer} ? $_ : ($_, baseline_of($_, $base))
    } @CASES;
}
my %CASE = map { $_->{id} => $_ } @CASES;

# Case `c` with the baseline build `so`: on a single Redis its keys in db 1,
# so that neither build meets the other's; a case of the Redis module's
# command on the baseline's Redis module, if given.
sub baseline_of {
    my ($c, $so) = @_;
    my %b = (%$c, id => "$c->{id}_base", label => "$c->{label} (baseline build)",
        load => "load_module $so;");
    return \%b if $c->{redis_nodes};
    if ($rt_base_module && ($c->{redis} // 0) == $rt_module) {
        $b{redis} = $rt_base_module;
        $b{http} =~ s/:$MODULE_RPORT\b/:$BASE_MODULE_RPORT/;
    }
    $b{http} =~ s/^(    ratelimit_redis \S+) /$1 db=1 /m or die "$c->{id}: no ratelimit_redis line\n";
    $b{db} = 1;
    return \%b;
}

# The latency pass's cases: each its own nginx, the same configuration keyed
# by $arg_key (h2load sends one set of headers; the subjects go in the URI).
my @OPEN;
if ($LATENCY) {
    die "BENCH_LATENCY=1 needs the plain case (its closed-loop req/s sets the loads)\n" unless $CASE{plain};
    for my $id (grep { $CASE{$_} } map { ($_, "${_}_base") } @LAT_IDS) {
        my $c = $CASE{$id};
        push @OPEN, { %$c, id => "${id}_open", base => $id,
            map { defined $c->{$_} ? ($_ => $c->{$_} =~ s/\$http_x_api_key\b/\$arg_key/gr) : () } qw(http loc) };
    }
}

for my $c (@CASES, @OPEN) {
    my $t = RateLimitTest->new(workers => 1);
    $c->{t} = $t;
    my $http = ($c->{http} // '');
    if ($c->{lua}) {
        lua_config($t, %{ $c->{lua} });
        $http .= "    lua_package_path \"%%TMP%%/?.lua;/usr/share/lua/5.1/?.lua;;\";\n"
               . "    init_by_lua_block { require \"openresty_peer\" }\n";
    }
    $t->write_conf($http . server_block($c->{loc}, $c->{extra}),
        no_module => ($c->{no_module} || $c->{lua} || $c->{load}) ? 1 : 0,
        main => $c->{lua} ? $LUA_MAIN : $c->{load},
        error_log_level => 'notice');
    if ($c->{peer}) {
        # a peer's module that does not load into this nginx is skipped
        if (!eval { $t->start_nginx; 1 }) {
            push @SKIPPED, "$c->{id}: skipped, nginx did not start with the peer's module: "
                . join(' | ', grep { /emerg|alert|error/ } split /\n/, $@);
            $c->{skip} = 1;
            next;
        }
    } else {
        $t->start_nginx;
    }
    $c->{worker} = worker_pid($t->nginx_pid) or die "no nginx worker for case $c->{id}\n";
    $c->{port} = $t->port;
}

# sanity: each instance serves the file with a key
for my $c (grep { !$_->{skip} } @CASES, @OPEN) {
    my $r = $c->{base} ? $c->{t}->get('/index.html?key=sanity') : $c->{t}->get('/index.html', { 'X-Api-Key' => 'sanity' });
    next if $r->{status} == 200 || ($c->{id} eq 'flood' && $r->{status} == 429);
    die "case $c->{id}: GET /index.html answered $r->{status}\n" . $c->{t}->error_log unless $c->{peer};
    push @SKIPPED, "$c->{id}: skipped, GET /index.html answered $r->{status}: "
        . join(' | ', grep { /\[(?:emerg|alert|crit|error)\]/ } split /\n/, $c->{t}->error_log);
    $c->{t}->stop_nginx;
    $c->{skip} = 1;
}
@CASES = grep { !$_->{skip} } @CASES;
@OPEN = grep { !$_->{skip} && $CASE{ $_->{base} } && !$CASE{ $_->{base} }{skip} } @OPEN;
%CASE = map { $_->{id} => $_ } @CASES;
note "nginx instances up: ", join(', ', map { "$_->{id}:$_->{port}" } @CASES, @OPEN);

# the peer's Redis connections: its upstream's keepalive pool should keep
# them to about the number of connections wrk holds
my $weserv_conns0 = $CASE{weserv} ? redis_conns($rt_weserv) : undef;

sub redis_conns {
    my ($at) = @_;
    return (rcmd_at($at, 'INFO', 'stats') =~ /^total_connections_received:(\d+)/m)[0];
}

# ---------------------------------------------------------------------------
# wrk

sub run_wrk {
    my (%o) = @_;
    my $t = $o{t};
    local $ENV{BENCH_SUBJECTS}   = $o{subjects} // $SUBJECTS;
    local $ENV{BENCH_KEY_PREFIX} = $o{key_prefix} // 'k';
    local $ENV{BENCH_QUOTA}      = $o{quota} // 0;
    local $ENV{BENCH_PATH}       = '/index.html';
    local $ENV{BENCH_DONE}       = $t->tmp . "/wrk.done";
    my $out = $t->tmp . "/wrk.out";
    unlink $out, glob($t->tmp . "/wrk.done.*");
    my $conns = $o{conns} // $CONNS;
    my $threads = $THREADS < $conns ? $THREADS : $conns;
    my @cmd = ($wrk, '-t', $threads, '-c', $conns, '-d', "$o{seconds}s", '--latency',
        '--timeout', '5s', '-s', $o{script}, 'http://127.0.0.1:' . $t->port . '/index.html');
    my $t0 = time;
    my $pid = $t->_spawn('wrk', $out, @cmd);
    my $deadline = time + $o{seconds} + 20;
    my $quota_done;
    while (1) {
        my $r = waitpid($pid, POSIX::WNOHANG());
        if ($r == $pid) {
            delete $RateLimitTest::CHILDREN{$pid};
            last;
        }
        $o{tick}->() if $o{tick};
        # with a quota, every wrk thread leaves a marker file when it has
        # sent its share; wrk's main thread sleeps for -d regardless, and
        # SIGINT makes it stop and report
        if ($o{quota} && !$quota_done && glob($t->tmp . "/wrk.done.*")
            && (() = glob($t->tmp . "/wrk.done.*")) >= $threads)
        {
            $quota_done = time;
            kill 'INT', $pid;
        }
        if (time > $deadline) {
            RateLimitTest::_terminate($pid, 'KILL', 1);
            die "wrk did not finish:\n" . slurp($out);
        }
        sleep 0.2;
    }
    my $status = $? >> 8;
    my $text = slurp($out);
    die "wrk failed (status $status): @cmd\n$text" if $status;
    $text =~ /^BENCHRESULT (.*)$/m or die "no result line from wrk:\n$text";
    my %r = map { split /=/, $_, 2 } split ' ', $1;
    die "wrk completed no requests:\n$text" unless $r{requests} > 0;
    # wrk's duration runs to SIGINT; a quota run's rate is up to the markers
    $r{elapsed} = $quota_done ? $quota_done - $t0 : $r{duration_us} / 1e6;
    $r{rps} = $r{requests} / $r{elapsed};
    $r{sockerr} = $r{connect} + $r{read} + $r{write} + $r{timeout};
    $r{text} = $text;
    return \%r;
}

sub measure {
    my ($c, $seconds) = @_;
    my $t = $c->{t};
    $seconds = $c->{seconds} if $c->{seconds} && $c->{seconds} < $seconds;
    my $s0 = redis_snapshot($c);
    my $w0 = proc_cpu($c->{worker});
    my (undef, undef, $cu0, $cs0) = times;
    my $w = run_wrk(t => $t, seconds => $seconds, script => "$Bin/keys.lua",
        subjects => $c->{subjects}, key_prefix => $c->{key_prefix}, conns => $c->{conns});
    my $w1 = proc_cpu($c->{worker});
    my (undef, undef, $cu1, $cs1) = times;    # wrk, the only child reaped meanwhile
    my $s1 = redis_snapshot($c);
    my $d = redis_delta($s0, $s1);
    my $n = $w->{requests};
    my $admitted = $n - $w->{status};
    return {
        rps => $w->{rps}, p50 => $w->{p50}, p99 => $w->{p99}, requests => $n,
        non2xx => $w->{status} / $n, sockerr => $w->{sockerr},
        per_request($d, $n, $w1 - $w0),
        usec_admitted => $admitted ? $d->{usec} / $admitted : undef,
        cpu_admitted  => $admitted ? $d->{cpu_us} / $admitted : undef,
        wrk_us => ($cu1 + $cs1 - $cu0 - $cs0) * 1e6 / $n,
    };
}

# What a run's Redis delta `d` and its worker's CPU time (µs) come to per
# request, over `n` requests.
sub per_request {
    my ($d, $n, $worker_us) = @_;
    return (calls => $d->{calls} / $n, top_calls => $d->{top_calls} / $n,
        usec => $d->{usec} / $n, cpu_us => $d->{cpu_us} / $n,
        worker_us => $worker_us / $n, detail => $d->{detail});
}

# ---------------------------------------------------------------------------
# the rounds

note "warm-up ${WARMUP}s per case" if $WARMUP > 0;
if ($WARMUP > 0) {
    measure($_, $WARMUP) for @CASES;
}

# Latency without saturation: one connection, plain vs module sliding (the
# 50-connection runs are closed-loop at full speed, where latency is mostly
# 50 / throughput).
my $LAT_SECONDS = $SECONDS < 3 ? $SECONDS : 3;
# (100 subjects of their own, "lat1".."lat100", each hit many times a
# second like the main runs' subjects, and apart from them)
my @LAT = map { +{ %{ $CASE{$_} }, id => "${_}_c1", conns => 1, seconds => $LAT_SECONDS,
                   subjects => 100, key_prefix => 'lat' } } grep { $CASE{$_} }
    qw(plain sliding lua_sliding);
my @MEAS = (@CASES, @LAT);

# Redis bytes per subject of the 60 s / 1 s zone, on the Redis of case `c`
# (in its db), sampled right after its last run, before its keys expire;
# "fields" a key's live buckets, in either layout.
sub sample_memory {
    my ($c) = @_;
    my $at = $c->{redis} // $rt;
    my $ask = sub { $c->{db} ? $at->redis_db($c->{db}, @_) : $at->redis(@_) };
    my $run = sub {
        my $r = $ask->(@_);
        die "redis $_[0]: $$r\n" if RateLimitTest::is_redis_error($r);
        return $r;
    };
    note "sampling MEMORY USAGE of z60 keys (subjects k1..k) of case $c->{id}";
    my (@mem, @fields, @keys, %seen);
    my $cursor = 0;
    do {
        my $r = $run->('SCAN', $cursor, 'MATCH', 'rl:z60:k*', 'COUNT', 1000);
        $cursor = $r->[0];
        $seen{$_} = 1 for @{ $r->[1] };
    } while ($cursor ne '0' && keys %seen < 500);
    @keys = (sort keys %seen)[0 .. ((keys %seen) < 500 ? (keys %seen) - 1 : 499)];
    for my $k (@keys) {
        my $m = $run->('MEMORY', 'USAGE', $k, 'SAMPLES', 0);
        next unless defined $m;
        push @mem, $m;
        my $w = RateLimitTest::Redis::read_window($ask, $k);
        push @fields, scalar grep { /^\d+$/ } keys %$w;
    }
    my $count = 0;
    $cursor = 0;
    do {
        my $r = $run->('SCAN', $cursor, 'MATCH', 'rl:z60:k*', 'COUNT', 5000);
        $cursor = $r->[0];
        $count += @{ $r->[1] };
    } while ($cursor ne '0');
    return {
        avg => @mem ? sum(@mem) / @mem : undef, sampled => \@mem,
        fields_avg => @fields ? sum(@fields) / @fields : undef, keys => $count,
        encoding => @keys ? $run->('OBJECT', 'ENCODING', $keys[0]) : undef,
    };
}

my %memory;    # case id => sample_memory()
my %res;    # id => [ per-round result ]
for my $round (1 .. $ROUNDS) {
    # rotate the order each round so no case always follows the same one
    my @order = @MEAS[ map { ($_ + $round - 1) % @MEAS } 0 .. $#MEAS ];
    for my $c (@order) {
        my $m = measure($c, $SECONDS);
        $m->{round} = $round;
        push @{ $res{ $c->{id} } }, $m;
        $memory{ $c->{id} } = sample_memory($c)
            if $round == $ROUNDS && $c->{id} =~ /^(?:sliding|native)(?:_base)?$/;
        note sprintf("round %d %-12s %8.0f req/s p50 %6.3f ms p99 %6.3f ms non2xx %5.1f%% redis %.2f cmd/req %.2f us/req  [%s]",
            $round, $c->{id}, $m->{rps}, $m->{p50} / 1000, $m->{p99} / 1000,
            100 * $m->{non2xx}, $m->{calls}, $m->{usec}, $m->{detail});
    }
}

my $mem_avg    = $memory{sliding}{avg};
my $fields_avg = $memory{sliding}{fields_avg};

# ---------------------------------------------------------------------------
# worker RSS before/after many distinct subjects (module, 60 s zone)

my ($rss_before, $rss_after, $rss_peak, $u, $ud);
if ($CASE{sliding} && $UNIQUE > 0) {
    my $sl = $CASE{sliding};
    $rss_before = rss_kb($sl->{worker});
    $rss_peak = $rss_before;
    note "RSS check: up to $UNIQUE distinct subjects, at most ${UNIQUE_SECS}s (worker RSS $rss_before kB)";
    my $s0 = redis_snapshot({});
    $u = run_wrk(t => $sl->{t}, seconds => $UNIQUE_SECS, script => "$Bin/unique.lua",
        quota => int(($UNIQUE + $THREADS - 1) / $THREADS), key_prefix => 'u' . int(time) . '-',
        tick => sub { my $r = rss_kb($sl->{worker}) // 0; $rss_peak = $r if $r > $rss_peak });
    my $s1 = redis_snapshot({});
    sleep 0.5;
    $rss_after = rss_kb($sl->{worker});
    $rss_peak = $rss_after if $rss_after > $rss_peak;
    $ud = redis_delta($s0, $s1);
    note sprintf("RSS check: %d requests in %.1fs, RSS %d -> %d kB (peak %d), non-2xx %d",
        $u->{requests}, $u->{elapsed}, $rss_before, $rss_after, $rss_peak, $u->{status});
}

# ---------------------------------------------------------------------------
# the open-loop latency pass (BENCH_LATENCY=1, issue 29)
#
# Each case of @OPEN at each offered load: h2load holding a rate (--rps per
# client, HTTP/1.1, $LAT_CLIENTS clients over $LAT_PROCS processes, each
# process walking the 10,000 subjects from its own offset, so that the
# requests in flight are for different subjects as in the closed loop: one
# h2load process starts every client at its first URI), per-request times
# from its --log-file; beside it bench/ping.pl timing PINGs to the case's
# Redis; the worker's CPU and the Redis counters as measure() takes them.

my (%open, $lat_capacity);    # "id load" => result; plain's closed-loop req/s

# one URI file per h2load process of a case, written once
sub uri_files {
    my ($c) = @_;
    return $c->{uri_files} if $c->{uri_files};
    my $step = int($SUBJECTS / $LAT_PROCS);
    my @files;
    for my $j (0 .. $LAT_PROCS - 1) {
        my $f = $c->{t}->tmp . "/uris.$j";
        open my $fh, '>', $f or die "open $f: $!\n";
        for my $i (0 .. $SUBJECTS - 1) {
            printf {$fh} "http://127.0.0.1:%d/index.html?key=k%d\n", $c->{port}, 1 + ($i + $j * $step) % $SUBJECTS;
        }
        close $fh or die "close $f: $!\n";
        push @files, $f;
    }
    return $c->{uri_files} = \@files;
}

sub run_open {
    my ($c, $total_rps, $seconds, %o) = @_;
    my $t = $c->{t};
    my $per_client = $total_rps / $LAT_CLIENTS;
    my $files = uri_files($c);
    my $dir = $t->tmp;
    unlink glob("$dir/h2load.*"), "$dir/ping.out";
    my $rport = $c->{redis} ? $c->{redis}->redis_port : $RPORT;
    my $s0 = redis_snapshot($c);
    my $w0 = proc_cpu($c->{worker});
    my $t0 = time;
    my %pids;
    for my $j (0 .. $LAT_PROCS - 1) {
        my @cmd = ($h2load, '--h1', '-t', 1, '-c', $LAT_CLIENTS / $LAT_PROCS,
            '--rps', sprintf('%.3f', $per_client), '-D', $seconds, '-i', $files->[$j],
            '--log-file', "$dir/h2load.$j.log");
        $pids{ $t->_spawn("h2load $j", "$dir/h2load.$j.out", @cmd) } = "h2load $j";
    }
    my $ping_pid;
    if (!$o{no_ping}) {
        $ping_pid = $t->_spawn('ping.pl', "$dir/ping.err", $^X, "$Bin/ping.pl", $rport, $LAT_PINGS, $seconds, "$dir/ping.out");
        $pids{$ping_pid} = 'ping.pl';
    }
    my $deadline = time + $seconds + 30;
    my %status;
    while (%pids) {
        for my $pid (keys %pids) {
            next unless waitpid($pid, POSIX::WNOHANG()) == $pid;
            $status{ $pids{$pid} } = $? >> 8;
            delete $RateLimitTest::CHILDREN{$pid};
            delete $pids{$pid};
        }
        if (%pids && time > $deadline) {
            RateLimitTest::_terminate($_, 'KILL', 1) for keys %pids;
            die "case $c->{id}: h2load / ping.pl did not finish\n";
        }
        sleep 0.1;
    }
    my $elapsed = time - $t0;
    my $w1 = proc_cpu($c->{worker});
    my $s1 = redis_snapshot($c);
    for my $what (sort keys %status) {
        next unless $status{$what};
        my $f = $what eq 'ping.pl' ? "$dir/ping.err" : "$dir/h2load." . (split ' ', $what)[1] . ".out";
        die "case $c->{id}: $what failed (status $status{$what}): " . (eval { slurp($f) } // '') . "\n";
    }
    my (@lat, $non2xx, $failed, $tmin, $tmax);
    for my $j (0 .. $LAT_PROCS - 1) {
        open my $fh, '<', "$dir/h2load.$j.log" or die "case $c->{id}: no h2load log: $!\n";
        while (my $line = <$fh>) {
            my ($start, $st, $us) = split /\t/, $line;
            next unless defined $us;
            $failed++, next if $st == -1;
            $non2xx++ unless $st =~ /^2/;
            push @lat, $us + 0;
            $tmin = $start if !defined $tmin || $start < $tmin;
            $tmax = $start if !defined $tmax || $start > $tmax;
        }
    }
    my $n = @lat;
    die "case $c->{id}: h2load completed no requests\n" unless $n;
    @lat = sort { $a <=> $b } @lat;
    my @ping;
    if (!$o{no_ping}) {
        @ping = sort { $a <=> $b } map { $_ + 0 } split /\n/, slurp("$dir/ping.out");
    }
    my $d = redis_delta($s0, $s1);
    return {
        offered => $total_rps, per_client => $per_client,
        rps => $n / $seconds, requests => $n, failed => $failed // 0, non2xx => ($non2xx // 0) / $n,
        span => ($tmax - $tmin) / 1e6,
        p50 => percentile(50, @lat), p99 => percentile(99, @lat), max => $lat[-1],
        ping_n => scalar(@ping), ping_p50 => percentile(50, @ping), ping_p99 => percentile(99, @ping),
        per_request($d, $n, $w1 - $w0),
        redis_cpu => $d->{cpu_us}, elapsed => $elapsed,
    };
}

if (@OPEN) {
    $lat_capacity = median(col('plain', 'rps'));
    note sprintf("latency pass: plain's closed-loop capacity %.0f req/s; loads %s; %ds per case and load; "
        . "%d clients in %d h2load processes; %d PINGs per run",
        $lat_capacity, join('/', @LAT_LOADS), $LAT_OPEN_SECS, $LAT_CLIENTS, $LAT_PROCS, $LAT_PINGS);
    if ($WARMUP > 0) {
        note "latency pass: warm-up ${WARMUP}s per case at $LAT_LOADS[0] x plain";
        for my $c (@OPEN) { run_open($c, $LAT_LOADS[0] * $lat_capacity, $WARMUP, no_ping => 1) }
    }
    my $k = 0;
    for my $load (@LAT_LOADS) {
        # rotate the order at each load so no case always follows the same one
        my @order = @OPEN[ map { ($_ + $k) % @OPEN } 0 .. $#OPEN ];
        $k++;
        for my $c (@order) {
            my $m = run_open($c, $load * $lat_capacity, $LAT_OPEN_SECS);
            $open{"$c->{base} $load"} = $m;
            note sprintf("latency %4.2f %-10s offered %6.0f got %6.0f req/s p50 %6.3f p99 %6.3f ms, PING p50 %.3f p99 %.3f ms, "
                . "nginx %.1f us/req, redis %.2f us/req %.3f calls/req [%s]",
                $load, $c->{base}, $m->{offered}, $m->{rps}, $m->{p50} / 1000, $m->{p99} / 1000,
                ($m->{ping_p50} // 0) / 1000, ($m->{ping_p99} // 0) / 1000, $m->{worker_us}, $m->{cpu_us},
                $m->{top_calls}, $m->{detail});
        }
    }
}

# ---------------------------------------------------------------------------
# health: crashes, alerts, limiter warnings

my @problems;
my @notes = @SKIPPED;
if ($CASE{weserv}) {
    push @notes, sprintf('weserv: built for this run from %s (%s) against %s; its Redis accepted %d connections '
        . 'over the warm-up and the rounds (upstream keepalive 1024; wrk holds %d); it sends no rate-limit headers '
        . 'unless it rejects (rate_limit_headers off by default), the module sends RateLimit headers (its default)',
        $PEERS, $WESERV->{commits}, $ENV{NGINX_SRC} // '/usr/share/nginx/src',
        redis_conns($rt_weserv) - $weserv_conns0, $CONNS);
}
for my $c (@CASES, @OPEN) {
    my $log = $c->{t}->error_log;
    my @bad = grep { /\[(?:alert|emerg)\]/ || /exited on signal/ } split /\n/, $log;
    push @problems, "$c->{id}: " . join("\n  ", @bad[0 .. ($#bad < 4 ? $#bad : 4)]) if @bad;
    my $warn = () = $log =~ /\[(?:warn|error)\]/g;
    push @notes, "$c->{id}: $warn [warn]/[error] lines in error.log, e.g. "
        . (($log =~ /^(.*\[(?:warn|error)\].*)$/m)[0] // '') if $warn;
    my $sockerr = sum(map { $_->{sockerr} } @{ $res{ $c->{id} } // [] });
    push @notes, "$c->{id}: $sockerr wrk socket errors over all rounds" if $sockerr;
}

# the metrics case recorded what it served: its scrape's count of decisions
if (my $mc = $CASE{sliding_metrics}) {
    my $m = $mc->{t}->get('/metrics?format=json');
    my $z = $m->{status} == 200 ? eval { JSON::PP::decode_json($m->{content})->{limit_reqs}{z60m} } : undef;
    my $served = sum(map { $_->{requests} } @{ $res{sliding_metrics} // [] });
    push @notes, $z
        ? sprintf('sliding_metrics: the scrape counted %d decisions (%d passed) against %d requests wrk completed in the measured rounds (warm-up not included)',
            $z->{passed} + $z->{rejected}, $z->{passed}, $served)
        : "sliding_metrics: the metrics scrape failed ($m->{status})";
}

# stop everything now (END blocks and RateLimitTest's handlers also do it)
for my $c (@CASES, @OPEN) { $c->{t}->stop_nginx }
$rt->stop_redis;
$rt_module->stop_redis;
$rt_base_module->stop_redis if $rt_base_module;
$rt_weserv->stop_redis if $rt_weserv;

# ---------------------------------------------------------------------------
# report

sub sum { my $s = 0; $s += $_ for @_; $s }

sub median {
    my @v = sort { $a <=> $b } grep { defined } @_;
    return undef unless @v;
    return @v % 2 ? $v[$#v / 2] : ($v[@v / 2 - 1] + $v[@v / 2]) / 2;
}

sub minmax {
    my @v = sort { $a <=> $b } grep { defined } @_;
    return @v ? ($v[0], $v[-1]) : (undef, undef);
}

sub col { my ($id, $k) = @_; map { $_->{$k} } @{ $res{$id} // [] } }

# per-round ratio of case $a to case $b
sub ratios {
    my ($x, $y, $k) = @_;
    $k //= 'rps';
    my %by = map { $_->{round} => $_->{$k} } @{ $res{$y} // [] };
    return map { $by{ $_->{round} } ? $_->{$k} / $by{ $_->{round} } : () } @{ $res{$x} // [] };
}

sub diffs {
    my ($x, $y, $k) = @_;
    my %by = map { $_->{round} => $_->{$k} } @{ $res{$y} // [] };
    return map { defined $by{ $_->{round} } ? $_->{$k} - $by{ $_->{round} } : () } @{ $res{$x} // [] };
}

sub f { my ($fmt, $v) = @_; defined $v ? sprintf($fmt, $v) : '-' }

my $date = strftime('%Y-%m-%d %H:%M:%S %Z', localtime);
my @out;
push @out, "# ngx_http_ratelimit_module benchmark";
push @out, "";
push @out, "Machine: nproc=$nproc, $cpu_model; nginx $nginx_version, redis $redis_version, "
    . "wrk $wrk_version, lua-nginx-module $lua_version, lua-resty-redis $resty_version; $date";
push @out, "";
push @out, "wrk: $THREADS thread(s), $CONNS connections, keep-alive, $SUBJECTS subjects (X-Api-Key), "
    . "$ROUNDS rounds x ${SECONDS}s per case, round-robin (order rotated each round), ${WARMUP}s warm-up per case; "
    . "one nginx worker per case, one redis-server (--save '' --appendonly no) and, for the Redis module command's cases, another with the module"
    . ($CASE{weserv} ? ", and for weserv's case a third with its Redis module (redis-rate-limiter)" : '')
    . ", all on loopback, no CPU pinning.";
push @out, "";
push @out, "| case | req/s median [min-max] | x plain [min-max] | p50 ms | p99 ms | redis cmds/req (top-level) | redis cmd us/req | redis CPU us/req | nginx worker CPU us/req | non-2xx |";
push @out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
for my $c (@CASES) {
    my $id = $c->{id};
    my ($lo, $hi) = minmax(col($id, 'rps'));
    my @rat = ratios($id, 'plain');
    my ($rlo, $rhi) = minmax(@rat);
    push @out, sprintf("| %s | %s [%s-%s] | %s [%s-%s] | %s | %s | %s (%s) | %s | %s | %s | %s |",
        $c->{label},
        f('%.0f', median(col($id, 'rps'))), f('%.0f', $lo), f('%.0f', $hi),
        f('%.2f', median(@rat)), f('%.2f', $rlo), f('%.2f', $rhi),
        f('%.3f', median(col($id, 'p50')) / 1000), f('%.3f', median(col($id, 'p99')) / 1000),
        f('%.2f', median(col($id, 'calls'))), f('%.2f', median(col($id, 'top_calls'))),
        f('%.2f', median(col($id, 'usec'))), f('%.2f', median(col($id, 'cpu_us'))),
        f('%.1f', median(col($id, 'worker_us'))),
        $c->{limiter} ? f('%.1f%%', 100 * median(col($id, 'non2xx'))) : '-');
}
push @out, "";
push @out, "Columns: medians over the rounds. \"x plain\" is the ratio to plain nginx within the same round. "
    . "Redis figures are deltas over each run divided by the requests wrk completed: cmds/req sums the calls of all "
    . "commands in INFO commandstats (including the HMGET/HSET/... a script runs; top-level = what the client sent); "
    . "cmd us/req sums their usec, counting a script's inner commands only once (inside EVALSHA); "
    . "redis CPU is used_cpu_user+used_cpu_sys from INFO cpu (includes networking). "
    . "nginx worker CPU is utime+stime of the case's worker from /proc.";
push @out, "";
push @out, "CPU per request (medians; cores busy = total x req/s; the machine has $nproc):";
push @out, "";
push @out, "| case | nginx worker us | redis us | wrk us | total us | cores busy |";
push @out, "|---|---:|---:|---:|---:|---:|";
for my $c (@CASES) {
    my $id = $c->{id};
    my ($nw, $rd, $wk) = map { median(col($id, $_)) } qw(worker_us cpu_us wrk_us);
    my $tot = $nw + $rd + $wk;
    push @out, sprintf("| %s | %.1f | %.1f | %.1f | %.1f | %.2f |", $id, $nw, $rd, $wk, $tot,
        $tot * median(col($id, 'rps')) / 1e6);
}
push @out, "";
push @out, sprintf("Latency at 1 connection (no saturation, %ds per round): plain p50 %s / p99 %s ms, module sliding p50 %s / p99 %s ms "
    . "(%s req/s vs %s req/s): the module adds %s ms at p50 and %s ms at p99 (median of per-round differences).",
    $LAT_SECONDS,
    f('%.3f', median(col('plain_c1', 'p50')) / 1000), f('%.3f', median(col('plain_c1', 'p99')) / 1000),
    f('%.3f', median(col('sliding_c1', 'p50')) / 1000), f('%.3f', median(col('sliding_c1', 'p99')) / 1000),
    f('%.0f', median(col('plain_c1', 'rps'))), f('%.0f', median(col('sliding_c1', 'rps'))),
    f('%+.3f', median(diffs('sliding_c1', 'plain_c1', 'p50')) / 1000),
    f('%+.3f', median(diffs('sliding_c1', 'plain_c1', 'p99')) / 1000));
push @out, sprintf("The OpenResty sliding peer at 1 connection: p50 %s / p99 %s ms (%s req/s).",
    f('%.3f', median(col('lua_sliding_c1', 'p50')) / 1000), f('%.3f', median(col('lua_sliding_c1', 'p99')) / 1000),
    f('%.0f', median(col('lua_sliding_c1', 'rps'))));
push @out, "";
push @out, "Per round (req/s): " . join('; ', map {
    my $id = $_->{id};
    "$id " . join('/', map { sprintf '%.0f', $_ } col($id, 'rps'))
} @CASES);
push @out, "";
push @out, "Redis commands per request (last round): " . join('; ', map {
    my $last = $res{ $_->{id} }[-1];
    "$_->{id}: $last->{detail}"
} grep { $_->{limiter} } @CASES);
push @out, "";

my $z60_bytes = $mem_avg;
push @out, "## Memory";
push @out, "";
# One line per case sampled (sliding, native and their baselines).
for my $id (grep { $memory{$_} } qw(sliding sliding_base native native_base)) {
    my $m = $memory{$id};
    push @out, sprintf("- Redis, 60 s window of 1 s buckets, case %s: %s bytes per active subject "
        . "(MEMORY USAGE SAMPLES 0, average over %d of %d keys, encoding %s), %s live buckets per key on average "
        . "(each subject was hit in that many distinct seconds; a key touched in all 60 seconds of its window "
        . "holds up to 60).", $id, f('%.0f', $m->{avg}), scalar(@{ $m->{sampled} }), $m->{keys} // 0,
        $m->{encoding} // '?', f('%.1f', $m->{fields_avg}));
}
my $rss_growth = $u ? $rss_after - $rss_before : undef;
if ($u) {
    push @out, sprintf("- nginx worker (module, 60 s zone) VmRSS: %d kB before, %d kB after %d requests for %d distinct subjects "
        . "(%.0f req/s over %.1f s, %d non-2xx; peak during the run %d kB): %+d kB.",
        $rss_before, $rss_after, $u->{requests}, $u->{requests}, $u->{rps}, $u->{elapsed},
        $u->{status}, $rss_peak, $rss_growth);
    push @out, sprintf("  Redis during that run: %.2f cmds/req, %.2f cmd us/req, %.2f CPU us/req.",
        $ud->{calls} / $u->{requests}, $ud->{usec} / $u->{requests}, $ud->{cpu_us} / $u->{requests});
    push @out, "- Note: the unique-subject run sent $u->{requests} of the $UNIQUE subjects asked for (time cap ${UNIQUE_SECS}s)."
        if $u->{requests} < $UNIQUE;
}
push @out, "";

# targets
my @targets;
sub target {
    my ($name, $ok, $value) = @_;
    push @targets, sprintf("%-4s %s: %s", !defined $ok ? 'N/A' : $ok ? 'PASS' : 'FAIL', $name, $value);
}
my $r_plain = median(ratios('sliding', 'plain'));
target('module sliding >= 0.7x plain', defined $r_plain ? $r_plain >= 0.7 : undef, f('%.2fx', $r_plain));
my $r_native = median(ratios('native', 'plain'));
target('module sliding, Redis module command >= 0.7x plain', defined $r_native ? $r_native >= 0.7 : undef,
    sprintf('%sx (the script, same run: %sx)', f('%.2f', $r_native), f('%.2f', $r_plain)));
my $cpu_native = median(col('native', 'cpu_us'));
target('Redis CPU per request <= 2 us (module sliding, Redis module command, INFO cpu incl. networking)',
    defined $cpu_native ? $cpu_native <= 2 : undef,
    sprintf('%s us (the script, same run: %s us; commandstats usec %s against %s)', f('%.2f', $cpu_native),
        f('%.2f', median(col('sliding', 'cpu_us'))), f('%.2f', median(col('native', 'usec'))),
        f('%.2f', median(col('sliding', 'usec')))));
my $r_cost_var = median(ratios('sliding_cost_var', 'sliding_cost'));
target('limit and cost from variables >= 0.97x the same zone with constants (3kv / 3k)',
    defined $r_cost_var ? $r_cost_var >= 0.97 : undef, f('%.2fx', $r_cost_var));
my $r_settle = median(ratios('sliding_settle', 'sliding'));
target('a settle on every request >= 0.85x the same zone without (3s / 3)',
    defined $r_settle ? $r_settle >= 0.85 : undef,
    sprintf('%sx; Redis CPU %s us/req against %s us', f('%.2f', $r_settle),
        f('%.2f', median(col('sliding_settle', 'cpu_us'))), f('%.2f', median(col('sliding', 'cpu_us')))));
for my $pair (['sliding_side', 'sliding', 'override=on, no override set', 'the script, 3o / 3'],
              ['native_side', 'native', 'override=on, no override set', 'the Redis module command, 3no / 3n'],
              ['sliding_ban', 'sliding', 'ban=, no ban in force', 'the script, 3b / 3'],
              ['native_ban', 'native', 'ban=, no ban in force', 'the Redis module command, 3nb / 3n']) {
    my ($id, $base, $case, $what) = @$pair;
    my $cpu = median(col($id, 'cpu_us'));
    my $cpu_base = median(col($base, 'cpu_us'));
    my $r = (defined $cpu && $cpu_base) ? $cpu / $cpu_base : undef;
    target("$case: Redis CPU per request within 5% of without ($what)",
        defined $r ? $r <= 1.05 : undef,
        sprintf('%s vs %s us/req (x%s; commandstats usec %s vs %s)', f('%.2f', $cpu), f('%.2f', $cpu_base),
            f('%.3f', $r), f('%.2f', median(col($id, 'usec'))), f('%.2f', median(col($base, 'usec')))));
}
my $r_top = median(ratios('sliding_top', 'sliding'));
target('top subjects kept (top=32): nginx throughput within 3% of top=off (3tk / 3)',
    defined $r_top ? $r_top >= 0.97 : undef, f('%.3fx', $r_top));
my $r_tls = median(ratios('sliding_tls', 'sliding'));
target('module sliding over TLS >= 0.9x over TCP', defined $r_tls ? $r_tls >= 0.9 : undef, f('%.2fx', $r_tls));
for my $mode (['sliding_cluster', 'one call per slot', 'sliding'], ['sliding_cross', 'cross_slot', 'sliding'],
              ['sliding_cross3', "cross_slot, each master's share of connections as one Redis's", 'sliding'],
              ['native_cluster', 'Redis module command, one call per slot', 'native']) {
    my ($id, $what, $base) = @$mode;
    my $sl_calls = median(col($base, 'top_calls'));
    my $sl_cpu = median(col($base, 'cpu_us'));
    my $calls = median(col($id, 'top_calls'));
    my $cpu = median(col($id, 'cpu_us'));
    my $r_calls = (defined $calls && $sl_calls) ? $calls / $sl_calls : undef;
    my $r_cpu = (defined $cpu && $sl_cpu) ? $cpu / $sl_cpu : undef;
    target("cluster ($what): calls per request within 1.5x of one Redis", defined $r_calls ? $r_calls <= 1.5 : undef,
        sprintf('%s vs %s calls/req (x%s)', f('%.3f', $calls), f('%.3f', $sl_calls), f('%.2f', $r_calls)));
    target("cluster ($what): Redis CPU per request, masters summed, within 1.5x of one Redis", defined $r_cpu ? $r_cpu <= 1.5 : undef,
        sprintf('%s vs %s us/req (x%s)', f('%.2f', $cpu), f('%.2f', $sl_cpu), f('%.2f', $r_cpu)));
}
my $r_lua = median(ratios('sliding', 'lua_sliding'));
target('module sliding >= 3x Lua sliding peer', defined $r_lua ? $r_lua >= 3 : undef, f('%.2fx', $r_lua));
my $r_luaf = median(ratios('sliding', 'lua_fixed'));
target('module sliding >= 1.7x Lua fixed peer', defined $r_luaf ? $r_luaf >= 1.7 : undef, f('%.2fx', $r_luaf));
my $r_metrics = median(ratios('sliding_metrics', 'sliding'));
target('metrics on >= 0.97x metrics off (module sliding)', defined $r_metrics ? $r_metrics >= 0.97 : undef,
    sprintf('%sx (per round %s)', f('%.3f', $r_metrics),
        join('/', map { sprintf '%.3f', $_ } ratios('sliding_metrics', 'sliding'))));
my $us_adm  = median(col('sliding', 'usec_admitted'));
my $cpu_adm = median(col('sliding', 'cpu_admitted'));
target('Redis CPU per admitted request <= 5 us (module sliding, commandstats usec)', defined $us_adm ? $us_adm <= 5 : undef,
    sprintf('%s us (INFO cpu, incl. networking: %s us)', f('%.2f', $us_adm), f('%.2f', $cpu_adm)));
my $u60 = median(col('sliding', 'usec'));
my $u1h = median(col('sliding1h', 'usec'));
my $r1h = (defined $u60 && defined $u1h && $u60 > 0) ? $u1h / $u60 : undef;
target('1h zone Redis cost within 20% of the 60s one', defined $r1h ? abs($r1h - 1) <= 0.2 : undef,
    sprintf('%s vs %s us/req (x%s; calls/req %s vs %s)', f('%.2f', $u1h), f('%.2f', $u60), f('%.2f', $r1h),
        f('%.2f', median(col('sliding1h', 'calls'))), f('%.2f', median(col('sliding', 'calls')))));
my $fl = median(col('flood', 'calls'));
target('flood Redis calls per request <= 0.05', defined $fl ? $fl <= 0.05 : undef,
    sprintf('%s calls/req (top-level %s), %s rejected', f('%.3f', $fl), f('%.3f', median(col('flood', 'top_calls'))),
        f('%.1f%%', defined $fl ? 100 * median(col('flood', 'non2xx')) : undef)));
my $p99d = median(diffs('sliding', 'plain', 'p99'));
my $p99l = median(diffs('sliding_c1', 'plain_c1', 'p99'));
target("p99 added over plain <= 0.5 ms ($CONNS connections)", defined $p99d ? $p99d <= 500 : undef,
    sprintf('%s ms (p99 %s vs %s ms; at 1 connection %s ms)', f('%+.3f', defined $p99d ? $p99d / 1000 : undef),
        f('%.3f', median(col('sliding', 'p99')) / 1000), f('%.3f', median(col('plain', 'p99')) / 1000),
        f('%+.3f', defined $p99l ? $p99l / 1000 : undef)));
target('Redis bytes per subject <= 200', defined $z60_bytes ? $z60_bytes <= 200 : undef,
    sprintf('%s bytes (%s buckets per key)', f('%.0f', $z60_bytes), f('%.1f', $fields_avg)));
target('worker RSS flat (growth <= 1024 kB)', $u ? $rss_growth <= 1024 : undef,
    $u ? sprintf('%+d kB over %d distinct subjects', $rss_growth, $u->{requests}) : '-');

# A calendar zone's Redis cost is a fixed window's (issue 42).
{
    my $cpu_c = median(col('fixed_cal', 'cpu_us'));
    my $cpu_f = median(col('fixed', 'cpu_us'));
    my $r = (defined $cpu_c && $cpu_f) ? $cpu_c / $cpu_f : undef;
    target("Redis CPU per request of a calendar-day zone within 10% of the fixed window's (same run, 4c / 4)",
        defined $r ? $r <= 1.10 : undef,
        sprintf('%s vs %s us/req (x%s; per round %s; commandstats usec %s vs %s; req/s x%s)',
            f('%.2f', $cpu_c), f('%.2f', $cpu_f), f('%.3f', $r),
            join('/', map { sprintf '%.2f', $_ } ratios('fixed_cal', 'fixed', 'cpu_us')) || '-',
            f('%.2f', median(col('fixed_cal', 'usec'))), f('%.2f', median(col('fixed', 'usec'))),
            f('%.2f', median(ratios('fixed_cal', 'fixed')))));
}

# GCRA nodelay against the fixed window and weserv, decided by the script
# (gcra vs fixed) and by the Redis module's command (native_gcra vs
# native_fixed).
for my $g (['gcra', 'fixed', 'the script'], ['native_gcra', 'native_fixed', 'the Redis module command']) {
    my ($gc, $fc, $how) = @$g;
    my $cpu_g = median(col($gc, 'cpu_us'));
    my $cpu_f = median(col($fc, 'cpu_us'));
    target("GCRA nodelay, $how: Redis CPU per request <= the fixed window's ($gc vs $fc)",
        (defined $cpu_g && defined $cpu_f) ? $cpu_g <= $cpu_f : undef,
        sprintf('%s vs %s us/req (x%s; per round %s; commandstats usec %s vs %s; weserv\'s Redis %s us/req)',
            f('%.2f', $cpu_g), f('%.2f', $cpu_f), f('%.2f', (defined $cpu_g && $cpu_f) ? $cpu_g / $cpu_f : undef),
            join('/', map { sprintf '%.2f', $_ } ratios($gc, $fc, 'cpu_us')) || '-',
            f('%.2f', median(col($gc, 'usec'))), f('%.2f', median(col($fc, 'usec'))),
            f('%.2f', median(col('weserv', 'cpu_us')))));
    my $r_wsv = median(ratios($gc, 'weserv'));
    target("GCRA nodelay, $how: >= 1.25x weserv (same run, ratio of req/s)", defined $r_wsv ? $r_wsv >= 1.25 : undef,
        $CASE{weserv}
            ? sprintf('%sx (per round %s; non-2xx %s vs %s)', f('%.2f', $r_wsv),
                join('/', map { sprintf '%.2f', $_ } ratios($gc, 'weserv')) || '-',
                f('%.1f%%', $CASE{$gc} ? 100 * median(col($gc, 'non2xx')) : undef),
                f('%.1f%%', 100 * median(col('weserv', 'non2xx'))))
            : 'weserv not run' . (@SKIPPED ? ' (see the notes)' : ''));
}

# Quota leases (issue 28).
{
    my $r_hot = median(ratios('lease_hot', 'plain'));
    target('lease mode, one hot subject: >= 0.9x plain nginx (same run, req/s)',
        defined $r_hot ? $r_hot >= 0.9 : undef,
        sprintf('%sx (per round %s; exact mode beside it %sx)', f('%.2f', $r_hot),
            join('/', map { sprintf '%.2f', $_ } ratios('lease_hot', 'plain')) || '-',
            f('%.2f', median(ratios('exact_hot', 'plain')))));
    my $calls = median(col('lease_hot', 'top_calls'));
    target('lease mode, one hot subject: <= 0.01 Redis calls per request',
        defined $calls ? $calls <= 0.01 : undef,
        sprintf('%s calls/req (exact mode %s)', f('%.4f', $calls), f('%.4f', median(col('exact_hot', 'top_calls')))));
    my $r_many = median(ratios('lease', 'sliding'));
    target('lease mode, 10,000 subjects: >= exact mode (same run, req/s)',
        defined $r_many ? $r_many >= 1 : undef,
        sprintf('%sx (per round %s; calls/req %s vs %s)', f('%.2f', $r_many),
            join('/', map { sprintf '%.2f', $_ } ratios('lease', 'sliding')) || '-',
            f('%.3f', median(col('lease', 'top_calls'))), f('%.3f', median(col('sliding', 'top_calls')))));
    my $r_near = median(ratios('lease_near', 'exact_near'));
    target("lease mode near the limit ($NEAR_LIMIT a window, reached): no worse than exact mode (>= 0.95x)",
        defined $r_near ? $r_near >= 0.95 : undef,
        sprintf('%sx (per round %s; non-2xx %s vs %s)', f('%.2f', $r_near),
            join('/', map { sprintf '%.2f', $_ } ratios('lease_near', 'exact_near')) || '-',
            f('%.1f%%', $CASE{lease_near} ? 100 * median(col('lease_near', 'non2xx')) : undef),
            f('%.1f%%', $CASE{exact_near} ? 100 * median(col('exact_near', 'non2xx')) : undef)));
}

# the latency pass: one table per load, and its targets (issue 29)
if (@OPEN) {
    my @ids = map { $_->{base} } @OPEN;
    my ($half) = grep { abs($_ - 0.5) < 1e-9 } @LAT_LOADS;
    my $o = sub { my ($id, $load, $k) = @_; my $m = $open{"$id $load"}; $m ? $m->{$k} : undef };
    # Redis CPU net of the PINGs and of an idle Redis's own work: minus what
    # the bench's Redis used per second during plain's run at the same load
    # (nothing but the PINGs and the bench's INFO calls reach it then)
    for my $load (@LAT_LOADS) {
        my $pl = $open{"plain $load"} or next;
        my $base = $pl->{redis_cpu} / $pl->{elapsed};
        for my $id (@ids) {
            my $m = $open{"$id $load"} or next;
            $m->{net_us} = ($m->{redis_cpu} - $base * $m->{elapsed}) / $m->{requests};
        }
    }
    push @out, "## Latency at fixed loads";
    push @out, "";
    push @out, sprintf("Open loop: h2load %s (HTTP/1.1, keep-alive), %d clients in %d processes, each client held to "
        . "its share of the offered rate (--rps), %ds per case and load, cases rotated at each load; offered loads are "
        . "fractions of plain nginx's closed-loop req/s in this run (median %s req/s). The requests carry the %d "
        . "subjects in ?key= (each case its own nginx, configured as its closed-loop twin but keyed by \$arg_key). "
        . "PINGs: bench/ping.pl, a process of its own, %d PINGs spread over each run to the case's Redis.",
        ((`$h2load --version 2>&1` // '') =~ m{(nghttp2/\S+)})[0] // '?', $LAT_CLIENTS, $LAT_PROCS,
        $LAT_OPEN_SECS, f('%.0f', $lat_capacity), $SUBJECTS, $LAT_PINGS);
    push @out, "";
    for my $load (@LAT_LOADS) {
        push @out, sprintf("### %.0f%% of plain's capacity: %s req/s offered", 100 * $load,
            f('%.0f', $load * $lat_capacity));
        push @out, "";
        push @out, "| case | req/s got | p50 ms | p99 ms | added p50 / p99 ms | PING p50 / p99 ms | nginx us/req | Redis us/req (net) | Redis calls/req | non-2xx |";
        push @out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
        for my $id (@ids) {
            my $m = $open{"$id $load"} or next;
            my $pl = $open{"plain $load"};
            push @out, sprintf("| %s | %.0f%s | %.3f | %.3f | %s / %s | %s / %s | %.1f | %.2f (%s) | %.3f | %s |",
                $id, $m->{rps}, $m->{rps} < 0.97 * $m->{offered} ? sprintf(' (%.2fx offered)', $m->{rps} / $m->{offered}) : '',
                $m->{p50} / 1000, $m->{p99} / 1000,
                $id eq 'plain' || !$pl ? '-' : sprintf('%+.3f', ($m->{p50} - $pl->{p50}) / 1000),
                $id eq 'plain' || !$pl ? '-' : sprintf('%+.3f', ($m->{p99} - $pl->{p99}) / 1000),
                f('%.3f', defined $m->{ping_p50} ? $m->{ping_p50} / 1000 : undef),
                f('%.3f', defined $m->{ping_p99} ? $m->{ping_p99} / 1000 : undef),
                $m->{worker_us}, $m->{cpu_us}, $id eq 'plain' ? '-' : f('%.2f', $m->{net_us}), $m->{top_calls},
                $m->{failed} ? sprintf('%.1f%% (+%d failed)', 100 * $m->{non2xx}, $m->{failed}) : sprintf('%.1f%%', 100 * $m->{non2xx}));
        }
        push @out, "";
    }
    push @out, "Columns: req/s got is what completed over the run (below the offered rate: the case did not keep up, "
        . "and its clients queued requests behind the one in flight). p50/p99: h2load's time per request, from sending "
        . "to the end of the response (a request sent late is timed from when it was sent); added = minus plain's at "
        . "the same load. PING: the round trip to the case's Redis timed at the same time (plain and limit_req: "
        . "the bench's Redis, idle but for the PINGs). nginx us/req: the case's worker utime+stime over the run per "
        . "request; Redis us/req: used_cpu_user+sys of the case's Redis per request, networking included, and the "
        . "PINGs and an idle Redis's own work too (plain's row is that share alone); (net): minus that share, "
        . "plain's Redis CPU per second at the same load times the case's run; calls/req: top-level Redis "
        . "commands per request. One run per case and load: compare within a table, not across runs.";
    push @out, "";
    my $at = sub { my ($id, $k) = @_; join('/', map { f('%.2f', $o->($id, $_, $k)) } @LAT_LOADS) };
    for my $id (grep { defined $half && $open{"$_ $half"} } qw(sliding native)) {
        my ($m, $pl) = ($open{"$id $half"}, $open{"plain $half"});
        my $add50 = ($m->{p50} - $pl->{p50}) / 1000;
        my $add99 = ($m->{p99} - $pl->{p99}) / 1000;
        my $b50 = defined $m->{ping_p50} ? $m->{ping_p50} / 1000 + 0.1 : undef;
        my $b99 = defined $m->{ping_p99} ? $m->{ping_p99} / 1000 + 0.5 : undef;
        target("latency added over plain at 50% of its capacity, $id: p50 <= PING p50 + 0.1 ms",
            defined $b50 ? $add50 <= $b50 : undef,
            sprintf('%+.3f ms (p50 %.3f vs plain %.3f ms) against %s ms (PING p50 %s ms); it held %.0f of %.0f req/s offered',
                $add50, $m->{p50} / 1000, $pl->{p50} / 1000, f('%.3f', $b50), f('%.3f', defined $b50 ? $b50 - 0.1 : undef),
                $m->{rps}, $m->{offered}));
        target("latency added over plain at 50% of its capacity, $id: p99 <= PING p99 + 0.5 ms",
            defined $b99 ? $add99 <= $b99 : undef,
            sprintf('%+.3f ms (p99 %.3f vs plain %.3f ms) against %s ms (PING p99 %s ms); it held %.0f of %.0f req/s offered',
                $add99, $m->{p99} / 1000, $pl->{p99} / 1000, f('%.3f', $b99), f('%.3f', defined $b99 ? $b99 - 0.5 : undef),
                $m->{rps}, $m->{offered}));
        my $lr = $open{"limit_req $half"};
        target("nginx worker CPU per limited request <= limit_req's at 50% of plain, $id",
            $lr ? $m->{worker_us} <= $lr->{worker_us} : undef,
            sprintf('%.1f vs %s us/req (at %s of plain: %s vs %s; plain %s)', $m->{worker_us},
                f('%.1f', $lr ? $lr->{worker_us} : undef), join('/', @LAT_LOADS), $at->($id, 'worker_us'),
                $at->('limit_req', 'worker_us'), $at->('plain', 'worker_us')));
        my $cap = $id eq 'native' ? 2 : 4;
        target(sprintf('Redis CPU per decided request at 50%% of plain, %s: <= %d us (%s)', $id, $cap,
                $id eq 'native' ? 'the Redis module command' : 'the script'),
            $m->{cpu_us} <= $cap,
            sprintf('%.2f us, net of the PINGs %s (at %s of plain: %s, net %s; closed loop %s; commandstats usec %.2f; %.3f calls/req)',
                $m->{cpu_us}, f('%.2f', $m->{net_us}), join('/', @LAT_LOADS), $at->($id, 'cpu_us'), $at->($id, 'net_us'),
                f('%.2f', median(col($id, 'cpu_us'))), $m->{usec}, $m->{top_calls}));
    }
}

push @out, "## Targets";
push @out, "";
push @out, map { "    $_" } @targets;
push @out, "";
if (@notes) {
    push @out, "## Notes";
    push @out, "";
    push @out, map { "- $_" } @notes;
    push @out, "";
}

my $report = join("\n", @out) . "\n";
print $report;
spew($OUT, $report);
note "report written to $OUT";

if (@problems) {
    print STDERR "nginx reported problems:\n  ", join("\n  ", @problems), "\n";
    exit 1;
}
exit 0;
