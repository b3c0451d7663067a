package RateLimitTest;

# Minimal, core-Perl-only test harness for ngx_http_ratelimit_module: the
# test object, made of the modules below, which it re-exports.
#
#   my $t = RateLimitTest->new(workers => 1);
#   $t->start_redis;
#   $t->write_conf(<<'EOF');
#   ratelimit_redis 127.0.0.1:%%REDIS_PORT%%;
#   ...
#   server { listen 127.0.0.1:%%PORT%%; ... }
#   EOF
#   $t->start_nginx;
#   my $r = $t->get('/lim/index.html', { 'X-Api-Key' => 'k1' });
#   $t->no_alerts;
#
# API (see each sub for details):
#   new(workers => N, clock => $t) temp dir (0755) with html/{index,a,b,x,ok}.html;
#                                  clock: share test $t's clock (below)
#   write_html($rel, $content)     extra files under html/
#   port($name)                    free loopback port for %%NAME%% (PORT, PORT2, ...)
#   start_redis(%o) / stop_redis / redis_port / redis_pid / redis_socket
#     %o: port, requirepass, unixsocket => 1|path, args => [...],
#         redis_module => 1|0 (load the Redis module or not; default: as
#         RATELIMIT_REDIS_MODULE says), clock => 1 (on the test's clock)
#   redis_module_so                the Redis module's path (undef if not built)
#   redis(@argv), redis_db($db, @argv), redis_keys($pattern[, $db]),
#   is_redis_error($reply)
#   redis_window($key[, $db])      a window key's fields (t, n, o, a bucket's
#                                  number => its count) in either layout
#   redis_window_count($key[, $db])   its stored count, t (undef if absent)
#   redis_window_total($key[, $db])   the sum of its buckets' counts (0 if
#                                  absent)
#   read_window($run, $key), window_count($run, $key)   the same through
#                                  $run->(@argv), a command on any Redis (a
#                                  node, redis_at)
#   start_redis_server(%o) / stop_process($pid) / start_child($desc, $code)
#                                  more Redis processes (replicas, sentinels, other
#                                  addresses), forked helpers (a DNS server)
#   redis_at({host, port, auth}, @argv)   one command to any Redis / sentinel
#   write_conf($http_body, %o)     %o: workers, no_module, main, error_log_level
#   conf_line($re)                 line number of the written conf matching $re
#   nginx_t                        (exit status, output) of "nginx -t"
#   start_nginx(clock => 1) / reload / stop_nginx([$timeout]) (true if
#                                  graceful) / worker_pids
#   set_clock($epoch) / clock_now  the wall clock of every process started
#                                  with clock => 1 (the clock shim): it reads
#                                  $epoch (fractional seconds) at once and
#                                  goes on from there; the time it reads.
#                                  Tests made with new(clock => $t) share
#                                  $t's: one clock for all their servers
#   get($path, \%headers, port => P)   HTTP::Tiny response + {elapsed}
#   get_as($loc, $key)            GET /$loc/index.html with X-Api-Key: $key
#   parallel_get(%o)               many forked clients at once
#   raw_exchange(@raw_requests)    several requests over one connection
#   error_log, access_log, count_log($re), wait_log($re, $n, $timeout)
#   access_entries([$min]), access_entries_for($uri|$coderef, $min)
#   no_alerts                      test: no [alert]/[emerg]/crashed worker
#   header($r, $name) / hdr, parse_ratelimit($s), parse_policy($s), sleep_until_phase($p, $off)
#   wait_until($cond, $timeout)    time when $cond->() first held (polled), or undef
#   fail_policy_http($redis, limit => N, ...)   zone "api" and the /open/, /closed/ server (Conf)
#
# Every process started here runs in its own process group and is killed
# (group-wide) by stop_*, DESTROY, an END block and INT/TERM/HUP handlers.
#
# Environment:
#   RATELIMIT_MODULE  path of the module .so (default <repo>/build/ngx_http_ratelimit_module.so)
#   NGINX_BIN         nginx binary (default /usr/sbin/nginx)
#   REDIS_BIN         redis-server binary (default redis-server from PATH or /usr/bin)
#   RATELIMIT_CLOCK_SHIM  path of the clock shim (default <dir of RATELIMIT_MODULE>/clock_shim.so)
#   RATELIMIT_REDIS_MODULE=path  every redis-server started here (not the
#                     sentinels) loads this Redis module, so nginx uses its
#                     command instead of the script
#   TEST_KEEP_TMP=1   keep the temporary directory (its path is printed)
#   RATELIMIT_SLOW=N  nginx runs N times slower than usual (under valgrind):
#                     waits for nginx are N times longer, and every Redis
#                     `timeout=` in a configuration becomes 10 s, so that
#                     requests still get Redis's verdicts
#
# Its parts (t/lib/RateLimitTest/), each usable on its own:
#   Env       paths, binaries, the module, slow(), file helpers
#   Process   process groups, cleanup, ports; start_child, stop_process
#   Redis     the test's redis-server and a RESP client; more redis-servers
#   Nginx     write_conf, nginx -t, start / reload / stop
#   HTTP      get, raw_exchange, parallel_get; header / hdr, parse_*
#   Log       error.log and access.log; no_alerts
#   Conf      configuration pieces many files share (fail-policy server)
#   Clock     a test's wall clock, the file the clock shim reads
#   Warnings  a Perl warning in a test file (*.t) is a failed test

use strict;
use warnings;

use Test::More ();
use File::Temp qw(tempdir);
use File::Basename qw(dirname);
use Time::HiRes qw(time sleep);
use Exporter 'import';

use RateLimitTest::Env qw(repo_dir window_script slow module_path nginx_bin
    redis_bin redis_module_so _module_args require_module _mkpath _write_file _read_file);
use RateLimitTest::Process qw(_alive _terminate _children_of free_port _port_open _kill_all);
use RateLimitTest::Redis qw(redis_at is_redis_error read_window window_count
    bucket_sum);
use RateLimitTest::Nginx ();
use RateLimitTest::HTTP qw(header hdr parse_ratelimit parse_policy);
use RateLimitTest::Log ();
use RateLimitTest::Conf qw(fail_policy_http fail_policy_server);
use RateLimitTest::Clock ();
BEGIN { require RateLimitTest::Warnings if $0 =~ /\.t\z/ }

our @ISA = qw(RateLimitTest::Process RateLimitTest::Redis RateLimitTest::Nginx
    RateLimitTest::HTTP RateLimitTest::Log);
our @EXPORT_OK = qw(parse_ratelimit parse_policy sleep_until_phase hdr
    fail_policy_http fail_policy_server percentile);

# The names the tests use for the process table and the owner.
{
    no warnings q(once);
    *CHILDREN = \%RateLimitTest::Process::CHILDREN;
    *OWNER_PID = \$RateLimitTest::Process::OWNER_PID;
}

# ---------------------------------------------------------------------------
# construction / cleanup

sub new {
    my ($class, %opts) = @_;
    umask 022;
    my $keep = $ENV{TEST_KEEP_TMP} ? 1 : 0;
    my $dir = tempdir('rltest-XXXXXX', TMPDIR => 1, CLEANUP => !$keep);
    chmod 0755, $dir or die "chmod $dir: $!";
    Test::More::diag("temp dir: $dir") if $keep;
    my $self = bless {
        tmp       => $dir,
        workers   => $opts{workers} // 1,
        ports     => {},
        owner     => $$,
        nginx_pid => undef,
        redis_pid => undef,
    }, $class;
    $self->{clock} = $opts{clock}->clock if $opts{clock};
    mkdir "$dir/html" or die "mkdir: $!";
    $self->write_html('index.html', "index page\n");
    $self->write_html('a.html',     "page a\n");
    $self->write_html('b.html',     "page b\n");
    $self->write_html('x.html',     "[x]");
    $self->write_html('ok.html',    "ok\n");
    return $self;
}

sub tmp { $_[0]{tmp} }

sub write_html {
    my ($self, $rel, $content) = @_;
    my $path = "$self->{tmp}/html/$rel";
    my $d = dirname($path);
    _mkpath($d);
    _write_file($path, $content);
    chmod 0644, $path;
    return $path;
}

# The wall clock of the processes started with clock => 1: this test's own
# (a file in its temp dir, made at first use) or the one new() was given.
sub clock {
    my ($self) = @_;
    return $self->{clock} //= RateLimitTest::Clock->new($self->{tmp});
}

sub set_clock { $_[0]->clock->set($_[1]) }
sub clock_now { $_[0]->clock->now }

# The environment that starts a process on the clock if $on, else none:
# for local @ENV{...}.
sub clock_env {
    my ($self, $on) = @_;
    return $on ? { $self->clock->env } : {};
}

sub DESTROY {
    my ($self) = @_;
    return unless $self->{owner} && $self->{owner} == $$;
    local ($@, $!, $?);
    eval { $self->stop_nginx } if $self->{nginx_pid};
    eval { $self->stop_redis } if $self->{redis_pid};
}

sub stop_all {
    my ($self) = @_;
    $self->stop_nginx;
    $self->stop_redis;
}


# Polls $cond->() every 50 ms: the time it first held, or undef after
# $timeout seconds.
sub wait_until {
    my ($cond, $timeout) = @_;
    my $deadline = time + $timeout;
    while (1) {
        return time if $cond->();
        return undef if time > $deadline;
        sleep 0.05;
    }
}

# The $p-th percentile of sorted numbers @v (the nearest rank); undef of
# none.
sub percentile {
    my ($p, @v) = @_;
    return undef unless @v;
    my $i = int($p / 100 * @v + 0.999999) - 1;
    $i = 0 if $i < 0;
    $i = $#v if $i > $#v;
    return $v[$i];
}

# Sleep until (time mod $period) == $offset (both in seconds), e.g. just after a
# bucket boundary.
sub sleep_until_phase {
    my ($period, $offset) = @_;
    my $now = time;
    my $ms  = $now * 1000;
    my $p   = $period * 1000;
    my $off = $offset * 1000;
    my $phase = $ms - $p * int($ms / $p);
    my $wait = $off - $phase;
    $wait += $p if $wait < 0;
    sleep($wait / 1000) if $wait > 0;
    return time;
}

1;
