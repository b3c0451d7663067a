package RateLimitTest;

# Minimal, core-Perl-only test harness for ngx_http_ratelimit_module.
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
#   new(workers => N)              temp dir (0755) with html/{index,a,b,x,ok}.html
#   write_html($rel, $content)     extra files under html/
#   port($name)                    free loopback port for %%NAME%% (PORT, PORT2, ...)
#   start_redis(%o) / stop_redis / redis_port / redis_pid / redis_socket
#     %o: port, requirepass, unixsocket => 1|path, args => [...],
#         redis_module => 1|0 (load the Redis module or not; default: as
#         RATELIMIT_REDIS_MODULE says)
#   redis_module_so                the Redis module's path (undef if not built)
#   redis(@argv), redis_db($db, @argv), redis_keys($pattern[, $db]),
#   redis_hash_total($key[, $db]), is_redis_error($reply)
#   start_redis_server(%o) / stop_process($pid) / start_child($desc, $code)
#                                  more Redis processes (replicas, sentinels, other
#                                  addresses), forked helpers (a DNS server)
#   redis_at({host, port, auth}, @argv)   one command to any Redis / sentinel
#   write_conf($http_body, %o)     %o: workers, no_module, main, error_log_level
#   conf_line($re)                 line number of the written conf matching $re
#   nginx_t                        (exit status, output) of "nginx -t"
#   start_nginx / reload / stop_nginx([$timeout]) (true if graceful) / worker_pids
#   get($path, \%headers, port => P)   HTTP::Tiny response + {elapsed}
#   parallel_get(%o)               many forked clients at once
#   raw_exchange(@raw_requests)    several requests over one connection
#   error_log, access_log, count_log($re), wait_log($re, $n, $timeout)
#   access_entries([$min]), access_entries_for($uri|$coderef, $min)
#   no_alerts                      test: no [alert]/[emerg]/crashed worker
#   header($r, $name), parse_ratelimit($s), parse_policy($s), sleep_until_phase($p, $off)
#   wait_until($cond, $timeout)    time when $cond->() first held (polled), or undef
#
# Every process started here runs in its own process group and is killed
# (group-wide) by stop_*, DESTROY, an END block and INT/TERM/HUP handlers.
#
# Environment:
#   RATELIMIT_MODULE  path of the module .so (default <repo>/build/ngx_http_ratelimit_module.so)
#   NGINX_BIN         nginx binary (default /usr/sbin/nginx)
#   REDIS_BIN         redis-server binary (default redis-server from PATH or /usr/bin)
#   RATELIMIT_REDIS_MODULE=path  every redis-server started here (not the
#                     sentinels) loads this Redis module, so nginx uses its
#                     command instead of the script
#   TEST_KEEP_TMP=1   keep the temporary directory (its path is printed)
#   RATELIMIT_SLOW=N  nginx runs N times slower than usual (under valgrind):
#                     waits for nginx are N times longer, and every Redis
#                     `timeout=` in a configuration becomes 10 s, so that
#                     requests still get Redis's verdicts

use strict;
use warnings;

use Test::More ();
use File::Temp qw(tempdir);
use File::Basename qw(dirname);
use File::Spec;
use Cwd qw(abs_path);
use IO::Socket::INET;
use IO::Select;
use HTTP::Tiny;
use POSIX qw(:sys_wait_h);
use Time::HiRes qw(time sleep);
use Exporter 'import';

our @EXPORT_OK = qw(parse_ratelimit parse_policy sleep_until_phase);

our $OWNER_PID = $$;
our %CHILDREN;                 # pid (== pgid) => description
my $REPO = abs_path(File::Spec->catdir(dirname(abs_path(__FILE__)), '..', '..'));

sub repo_dir { $REPO }

# The module's Redis script as it sends it: the text between R"lua( and
# )lua" in src/scripts/window_script.cpp.
sub window_script {
    my $path = "$REPO/src/scripts/window_script.cpp";
    _read_file($path) =~ /R"lua\((.*?)\)lua"/s
        or die "no R\"lua( ... )lua\" script in $path\n";
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

sub DESTROY {
    my ($self) = @_;
    return unless $self->{owner} && $self->{owner} == $$;
    local ($@, $!, $?);
    eval { $self->stop_nginx } if $self->{nginx_pid};
    eval { $self->stop_redis } if $self->{redis_pid};
}

END {
    local $?;
    _kill_all() if $$ == $OWNER_PID;
}

for my $sig (qw(INT TERM HUP)) {
    $SIG{$sig} = sub {
        _kill_all() if $$ == $OWNER_PID;
        POSIX::_exit(1) if $$ != $OWNER_PID;
        exit 1;
    };
}

sub _kill_all {
    for my $pid (keys %CHILDREN) {
        _terminate($pid, 'TERM', 3);
    }
}

# ---------------------------------------------------------------------------
# processes

sub _spawn {
    my ($self, $desc, $outfile, @cmd) = @_;
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if ($pid == 0) {
        POSIX::setpgid(0, 0);
        open STDIN, '<', '/dev/null';
        open STDOUT, '>>', $outfile or POSIX::_exit(126);
        open STDERR, '>&', \*STDOUT or POSIX::_exit(126);
        no warnings q(exec);
        exec { $cmd[0] } @cmd;
        POSIX::_exit(127);
    }
    POSIX::setpgid($pid, $pid);    # avoid the race with the child's own setpgid
    $CHILDREN{$pid} = $desc;
    return $pid;
}

sub _alive {
    my ($pid) = @_;
    my $r = waitpid($pid, WNOHANG);
    if ($r == $pid || $r == -1) {
        delete $CHILDREN{$pid};
        return 0;
    }
    return 1;
}

# Signal the process, wait for it, then SIGKILL its whole process group.
# Returns true if the process exited by itself within $timeout seconds.
sub _terminate {
    my ($pid, $sig, $timeout) = @_;
    return 1 unless $CHILDREN{$pid};
    kill $sig, $pid;
    my $deadline = time + $timeout;
    my $exited = 0;
    while (time < $deadline) {
        # /proc state 'Z' means it exited but is not reaped yet: the group id
        # cannot be reused, so killing the group is safe.
        my $st = _read_file("/proc/$pid/stat");
        if (!$st || $st =~ /^\d+ \(.*\) Z/s) { $exited = 1; last }
        sleep 0.02;
    }
    kill 'KILL', -$pid;    # leftovers (e.g. workers) in the process group
    kill 'KILL', $pid;
    waitpid($pid, 0);
    delete $CHILDREN{$pid};
    return $exited;
}

# Pids of the direct children of $pid (e.g. the nginx workers of a master).
sub _children_of {
    my ($ppid) = @_;
    my @kids;
    opendir my $d, '/proc' or return ();
    for my $p (grep { /^\d+$/ } readdir $d) {
        my $st = _read_file("/proc/$p/stat");
        push @kids, $p if $st =~ /^\d+ \(.*\) \S (\d+) /s && $1 == $ppid;
    }
    closedir $d;
    return sort { $a <=> $b } @kids;
}

sub free_port {
    my $s = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp', Listen => 1, ReuseAddr => 1,
    ) or die "cannot bind a free port: $!";
    my $p = $s->sockport;
    close $s;
    return $p;
}

# Named loopback ports, allocated lazily: port() / port('PORT2') / port('REDIS_PORT') ...
sub port {
    my ($self, $name) = @_;
    $name //= 'PORT';
    $self->{ports}{$name} //= do {
        my $p;
        my %used = map { $_ => 1 } grep { defined } values %{ $self->{ports} };
        do { $p = free_port() } while $used{$p};
        $p;
    };
}

sub _port_open {
    my ($port) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp', Timeout => 1);
    return 0 unless $s;
    close $s;
    return 1;
}

# ---------------------------------------------------------------------------
# redis

sub redis_port { $_[0]->port('REDIS_PORT') }

# start_redis(port => P, requirepass => 'x', unixsocket => 1 | '/path', args => [...])
sub start_redis {
    my ($self, %o) = @_;
    die "redis already running" if $self->{redis_pid};
    my $port = $o{port} // $self->redis_port;
    $self->{ports}{REDIS_PORT} = $port;
    my @cmd = (redis_bin(), '--port', $port, '--bind', '127.0.0.1', '--save', '',
        '--appendonly', 'no', '--daemonize', 'no', '--dir', $self->{tmp},
        '--protected-mode', 'no', '--loglevel', 'notice');
    if ($o{unixsocket}) {
        my $path = $o{unixsocket} eq '1' ? "$self->{tmp}/redis.sock" : $o{unixsocket};
        push @cmd, '--unixsocket', $path, '--unixsocketperm', '777';
        $self->{redis_socket} = $path;
    }
    push @cmd, '--requirepass', $o{requirepass} if defined $o{requirepass};
    push @cmd, _module_args($o{redis_module});
    push @cmd, @{ $o{args} } if $o{args};
    $self->{redis_auth} = defined $o{requirepass} ? [$o{requirepass}] : undef;
    my $pid = $self->_spawn('redis-server', "$self->{tmp}/redis.out", @cmd);
    $self->{redis_pid} = $pid;
    $self->_redis_close;

    my $deadline = time + 5;
    while (1) {
        if (!_alive($pid)) {
            $self->{redis_pid} = undef;
            die "redis-server exited at start:\n" . _read_file("$self->{tmp}/redis.out");
        }
        my $ok = eval { my $r = $self->redis('PING'); defined $r && $r eq 'PONG' };
        last if $ok;
        $self->_redis_close;
        if (time > $deadline) {
            die "redis-server did not answer PING within 5s:\n" . _read_file("$self->{tmp}/redis.out");
        }
        sleep 0.05;
    }
    return $pid;
}

sub redis_pid { $_[0]{redis_pid} }
sub redis_socket { $_[0]{redis_socket} }

sub stop_redis {
    my ($self) = @_;
    my $pid = delete $self->{redis_pid} or return;
    $self->_redis_close;
    _terminate($pid, 'TERM', 5);
}

sub _redis_close {
    my ($self) = @_;
    if (my $s = delete $self->{rsock}) { close $s }
    $self->{rbuf} = '';
}

sub _redis_connect {
    my ($self) = @_;
    my $s = IO::Socket::INET->new(
        PeerAddr => '127.0.0.1', PeerPort => $self->redis_port, Proto => 'tcp', Timeout => 2,
    ) or die "cannot connect to redis on port " . $self->redis_port . ": $!";
    binmode $s;
    $self->{rsock} = $s;
    $self->{rbuf}  = '';
    if ($self->{redis_auth}) {
        my $r = $self->_redis_cmd('AUTH', @{ $self->{redis_auth} });
        die "redis AUTH failed: $$r" if ref $r eq 'RateLimitTest::RedisError';
    }
    return $s;
}

# $t->redis(@argv): run one command, return the parsed reply.
# Simple string / bulk -> scalar, integer -> number, nil -> undef, array -> array ref,
# error -> RateLimitTest::RedisError object (use is_redis_error()).
sub redis {
    my ($self, @argv) = @_;
    $self->_redis_connect unless $self->{rsock};
    my $r = eval { $self->_redis_cmd(@argv) };
    if ($@) {
        my $e = $@;
        $self->_redis_close;
        die $e;
    }
    return $r;
}

# Run commands in another logical database (SELECT db; cmd; SELECT 0).
sub redis_db {
    my ($self, $db, @argv) = @_;
    my $s = $self->redis('SELECT', $db);
    die "SELECT $db failed: $$s" if is_redis_error($s);
    my $r = $self->redis(@argv);
    $self->redis('SELECT', 0);
    return $r;
}

sub is_redis_error { ref($_[-1]) eq 'RateLimitTest::RedisError' }

sub _redis_cmd {
    my ($self, @argv) = @_;
    my $req = '*' . scalar(@argv) . "\r\n";
    for my $a (@argv) {
        my $b = "$a";
        utf8::encode($b) if utf8::is_utf8($b);
        $req .= '$' . length($b) . "\r\n" . $b . "\r\n";
    }
    my $s = $self->{rsock};
    my $off = 0;
    while ($off < length $req) {
        my $n = syswrite($s, $req, length($req) - $off, $off);
        die "redis write: $!" unless defined $n;
        $off += $n;
    }
    return $self->_redis_reply;
}

sub _redis_fill {
    my ($self) = @_;
    my $sel = IO::Select->new($self->{rsock});
    die "redis read timeout\n" unless $sel->can_read(5);
    my $n = sysread($self->{rsock}, my $buf, 65536);
    die "redis read: $!\n" unless defined $n;
    die "redis closed the connection\n" if $n == 0;
    $self->{rbuf} .= $buf;
}

sub _redis_line {
    my ($self) = @_;
    while (1) {
        my $i = index($self->{rbuf}, "\r\n");
        if ($i >= 0) {
            my $line = substr($self->{rbuf}, 0, $i);
            substr($self->{rbuf}, 0, $i + 2, '');
            return $line;
        }
        $self->_redis_fill;
    }
}

sub _redis_bytes {
    my ($self, $n) = @_;
    $self->_redis_fill while length($self->{rbuf}) < $n + 2;
    my $data = substr($self->{rbuf}, 0, $n);
    substr($self->{rbuf}, 0, $n + 2, '');
    return $data;
}

sub _redis_reply {
    my ($self) = @_;
    my $line = $self->_redis_line;
    my ($type, $rest) = (substr($line, 0, 1), substr($line, 1));
    if    ($type eq '+') { return $rest }
    elsif ($type eq '-') { return bless \(my $e = $rest), 'RateLimitTest::RedisError' }
    elsif ($type eq ':') { return 0 + $rest }
    elsif ($type eq '$') {
        return undef if $rest < 0;
        return $self->_redis_bytes($rest);
    }
    elsif ($type eq '*') {
        return undef if $rest < 0;
        return [ map { $self->_redis_reply } 1 .. $rest ];
    }
    die "unexpected redis reply line: $line\n";
}

# Redis time in milliseconds: the clock the script's windows are aligned to.
sub redis_time_ms {
    my ($self) = @_;
    my $r = $self->redis('TIME');
    return $r->[0] * 1000 + int($r->[1] / 1000);
}

# Total count held in a per-subject Redis hash: the sum of the bucket counters.
# Bucket fields are taken to be the fields with purely numeric names (bucket
# numbers); bookkeeping fields with other names are ignored.  If no field has a
# numeric name, all integer values are summed.
sub redis_hash_total {
    my ($self, $key, $db) = @_;
    my $r = defined $db ? $self->redis_db($db, 'HGETALL', $key) : $self->redis('HGETALL', $key);
    return undef if !ref $r || is_redis_error($r);
    my %h = @$r;
    my @num = grep { /^\d+$/ } keys %h;
    my @f = @num ? @num : keys %h;
    my $sum = 0;
    for (@h{@f}) { $sum += $_ if defined && /^-?\d+$/ }
    return $sum;
}

# All keys matching a pattern (sorted), in the given db (default 0).
sub redis_keys {
    my ($self, $pattern, $db) = @_;
    my $r = defined $db ? $self->redis_db($db, 'KEYS', $pattern) : $self->redis('KEYS', $pattern);
    die "KEYS failed: $$r" if is_redis_error($r);
    return sort @$r;
}

package RateLimitTest::RedisError;
use overload '""' => sub { ${ $_[0] } }, fallback => 1;

package RateLimitTest;

# ---------------------------------------------------------------------------
# nginx configuration

# Writes TMP/nginx.conf. Options:
#   workers => N        worker_processes (default: new()'s workers)
#   no_module => 1      do not emit load_module / the ratelimit log_format (plain nginx)
#   main => '...'       extra main-context directives
#   access_log_format   log_format used for TMP/access.log (default "rltest")
sub write_conf {
    my ($self, $body, %o) = @_;
    my $tmp = $self->{tmp};
    my $workers = $o{workers} // $self->{workers};
    my $conf = '';
    $conf .= "load_module " . module_path() . ";\n" unless $o{no_module};
    $conf .= "worker_processes $workers;\n";
    $conf .= "daemon off;\nmaster_process on;\n";
    $conf .= "pid $tmp/nginx.pid;\n";
    $conf .= "error_log $tmp/error.log " . ($o{error_log_level} // 'info') . ";\n";
    $conf .= "user nobody nogroup;\n" if $> == 0;
    $conf .= "$o{main}\n" if defined $o{main};
    $conf .= "events {\n    worker_connections 1024;\n}\n";
    $conf .= "http {\n";
    my $fmt = 'combined';
    unless ($o{no_module}) {
        $conf .= q{    log_format rltest '$request_uri $status pid=$pid }
               . q{rs="$ratelimit_status" lim="$ratelimit_limit" rem="$ratelimit_remaining" reset="$ratelimit_reset"';} . "\n";
        $fmt = 'rltest';
    }
    $fmt = $o{access_log_format} if $o{access_log_format};
    $conf .= "    access_log $tmp/access.log $fmt;\n";
    for my $p (qw(client_body proxy fastcgi uwsgi scgi)) {
        $conf .= "    ${p}_temp_path $tmp/${p}_temp;\n";
    }
    $conf .= "    default_type text/plain;\n";
    $conf .= "    types { text/html html; }\n";
    my $http = $self->expand($body);
    if (slow() > 1) {
        $http =~ s{^(\s*ratelimit_redis\b[^;]*);}
                  {my $d = $1; $d =~ s/\s+timeout=\S+//; "$d timeout=10s;"}mge;
    }
    $conf .= $http;
    $conf .= "\n}\n";
    _write_file("$tmp/nginx.conf", $conf);
    $self->{conf_text} = $conf;
    $self->{nginx_workers} = $workers;
    return "$tmp/nginx.conf";
}

# Replace %%PORT%%, %%PORT2%%, %%REDIS_PORT%%, %%TMP%%, %%ANYNAME%% (-> a free port).
sub expand {
    my ($self, $text) = @_;
    $text =~ s/%%TMP%%/$self->{tmp}/g;
    $text =~ s/%%([A-Z][A-Z0-9_]*)%%/$self->port($1)/ge;
    return $text;
}

sub conf_path { "$_[0]{tmp}/nginx.conf" }
sub conf_text { $_[0]{conf_text} }

# 1-based line number of the first line of the written conf matching $re.
sub conf_line {
    my ($self, $re) = @_;
    my @l = split /\n/, $self->{conf_text} // '';
    for my $i (0 .. $#l) {
        return $i + 1 if $l[$i] =~ $re;
    }
    return undef;
}

# Runs "nginx -t" on the written conf; returns (exit_status, combined output).
sub nginx_t {
    my ($self) = @_;
    my $tmp = $self->{tmp};
    my $out = "$tmp/nginx_t.out";
    unlink $out, "$tmp/nginx_t.log";
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if ($pid == 0) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', $out or POSIX::_exit(126);
        open STDERR, '>&', \*STDOUT or POSIX::_exit(126);
        no warnings q(exec);
        exec { nginx_bin() } nginx_bin(), '-t', '-p', "$tmp/", '-c', "$tmp/nginx.conf", '-e', "$tmp/nginx_t.log";
        POSIX::_exit(127);
    }
    my $deadline = time + 10;
    my $r;
    while (($r = waitpid($pid, WNOHANG)) == 0 && time < $deadline) { sleep 0.02 }
    if ($r == 0) { kill 'KILL', $pid; waitpid($pid, 0); }
    my $status = $? >> 8;
    my $text = _read_file($out);
    my $log = _read_file("$tmp/nginx_t.log");
    # messages normally reach stderr too; include the -e log in case they do not
    $text .= $log if length $log && $text !~ /\[emerg\]/;
    return ($status, $text);
}

sub start_nginx {
    my ($self) = @_;
    die "nginx already running" if $self->{nginx_pid};
    my $tmp = $self->{tmp};
    my $pid = $self->_spawn('nginx', "$tmp/nginx.out",
        nginx_bin(), '-p', "$tmp/", '-c', "$tmp/nginx.conf", '-e', "$tmp/error.log");
    $self->{nginx_pid} = $pid;
    my $port = $self->port('PORT');
    my $deadline = time + 5 * slow();
    while (1) {
        if (!_alive($pid)) {
            $self->{nginx_pid} = undef;
            die "nginx exited at start (status " . ($? >> 8) . "):\n"
                . _read_file("$tmp/nginx.out") . _read_file("$tmp/error.log");
        }
        last if _port_open($port);
        if (time > $deadline) {
            $self->stop_nginx;
            die "nginx did not accept on port $port within 5s:\n" . _read_file("$tmp/error.log");
        }
        sleep 0.05;
    }
    # wait until all workers are up (so the first requests do not race the fork)
    my $want = $self->{nginx_workers} // 1;
    $deadline = time + 3 * slow();
    while (time < $deadline && $self->count_log(qr/start worker process \d+/) < $want) {
        sleep 0.02;
    }
    return $pid;
}

sub nginx_pid { $_[0]{nginx_pid} }

sub reload {
    my ($self) = @_;
    my $pid = $self->{nginx_pid} or die "nginx not running";
    my $before = $self->count_log(qr/start worker process \d+/);
    kill 'HUP', $pid;
    my $deadline = time + 5;
    my $want = $before + ($self->{nginx_workers} // 1);
    while (time < $deadline && $self->count_log(qr/start worker process \d+/) < $want) {
        sleep 0.05;
    }
    sleep 0.3;    # let old workers close their listeners
}

# Graceful stop (SIGQUIT), SIGKILL after $timeout (default 5) seconds.
# Returns true if nginx exited by itself in time.
sub stop_nginx {
    my ($self, $timeout) = @_;
    my $pid = delete $self->{nginx_pid} or return 1;
    return _terminate($pid, 'QUIT', $timeout // 5);
}

# Pids of the current nginx worker processes (children of the master, also
# old workers still shutting down after a reload).
sub worker_pids {
    my ($self) = @_;
    my $pid = $self->{nginx_pid} or return ();
    return _children_of($pid);
}

sub stop_all {
    my ($self) = @_;
    $self->stop_nginx;
    $self->stop_redis;
}

# ---------------------------------------------------------------------------
# HTTP

sub url {
    my ($self, $path, $port) = @_;
    return "http://127.0.0.1:" . ($port // $self->port('PORT')) . $path;
}

# GET; returns the HTTP::Tiny response with an extra {elapsed} (seconds).
# Header names in {headers} are lower-case.
sub get {
    my ($self, $path, $headers, %o) = @_;
    my $ua = HTTP::Tiny->new(timeout => ($o{timeout} // 5) * slow(), keep_alive => 0,
                             max_redirect => 0);
    my $t0 = time;
    my $r = $ua->get($self->url($path, $o{port}), { headers => $headers // {} });
    $r->{elapsed} = time - $t0;
    return $r;
}

# Raw HTTP over one connection: sends each request (bytes) in turn and reads
# one response after each.  Returns a list of { status, headers, content } or
# { closed => 1 } when the server closed the connection instead of answering.
sub raw_exchange {
    my ($self, @requests) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $self->port('PORT'),
        Proto => 'tcp', Timeout => 5) or die "connect: $!";
    binmode $s;
    my $buf = '';
    my @out;
    my $fill = sub {
        my $sel = IO::Select->new($s);
        return 0 unless $sel->can_read(5);
        my $n = sysread($s, my $b, 65536);
        return 0 unless $n;
        $buf .= $b;
        return 1;
    };
    for my $req (@requests) {
        my $w = syswrite($s, $req);
        unless (defined $w) { push @out, { closed => 1 }; last }
        my $i;
        while (($i = index($buf, "\r\n\r\n")) < 0) {
            last unless $fill->();
        }
        if ($i < 0) { push @out, { closed => 1, partial => $buf }; last }
        my $head = substr($buf, 0, $i);
        substr($buf, 0, $i + 4, '');
        my ($status_line, @lines) = split /\r\n/, $head;
        my ($status) = $status_line =~ m{^HTTP/\d\.\d (\d{3})};
        my %h;
        for (@lines) { $h{ lc $1 } = $2 if /^([^:]+):\s*(.*)$/ }
        my $len = $h{'content-length'} // 0;
        while (length($buf) < $len) { last unless $fill->() }
        my $content = substr($buf, 0, $len);
        substr($buf, 0, $len, '');
        push @out, { status => $status, headers => \%h, content => $content };
        last if ($h{connection} // '') =~ /close/i;
    }
    close $s;
    return @out;
}

# Fires requests from $clients forked processes at once; returns the list of
# responses as hashes { status, headers => {...} } (header names lower-case).
#   $t->parallel_get(clients => 8, requests => 200, path => '/x', headers => {...})
#   or requests_for => sub { my ($client, $i) = @_; return ($path, \%headers) }
sub parallel_get {
    my ($self, %o) = @_;
    my $clients = $o{clients} // 8;
    my $total   = $o{requests} // 100;
    my $start   = time + 0.3;
    my @pids;
    for my $c (0 .. $clients - 1) {
        my $n = int($total / $clients) + ($c < $total % $clients ? 1 : 0);
        my $pid = fork;
        die "fork: $!" unless defined $pid;
        if ($pid == 0) {
            my $out = '';
            eval {
                sleep($start - time) if $start > time;
                my $ua = HTTP::Tiny->new(timeout => 10, keep_alive => $o{keep_alive} ? 1 : 0);
                for my $i (0 .. $n - 1) {
                    my ($path, $h) = $o{requests_for} ? $o{requests_for}->($c, $i) : ($o{path}, $o{headers});
                    my $r = $ua->get($self->url($path), { headers => $h // {} });
                    my $hdr = join "\t", map {
                        my $v = $r->{headers}{$_};
                        "$_=" . (ref $v ? join(', ', @$v) : $v)
                    } sort keys %{ $r->{headers} };
                    $hdr =~ s/\n/ /g;
                    $out .= "$r->{status}\t$c\t$hdr\n";
                }
                1;
            } or $out .= "ERR\t$c\t$@\n";
            _write_file("$self->{tmp}/client.$c.$$", $out);
            POSIX::_exit(0);
        }
        $CHILDREN{$pid} = 'client';
        push @pids, $pid;
    }
    my @res;
    for my $pid (@pids) {
        waitpid($pid, 0);
        delete $CHILDREN{$pid};
    }
    for my $c (0 .. $clients - 1) {
        my $pid = $pids[$c];
        my $text = _read_file("$self->{tmp}/client.$c.$pid");
        unlink "$self->{tmp}/client.$c.$pid";
        for my $line (split /\n/, $text) {
            my ($st, $cl, @h) = split /\t/, $line;
            my %h = map { /^([^=]*)=(.*)$/s ? ($1, $2) : () } @h;
            push @res, { status => $st, client => $cl, headers => \%h };
        }
    }
    return @res;
}

# ---------------------------------------------------------------------------
# logs

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

# ---------------------------------------------------------------------------
# helpers

sub header {
    my ($r, $name) = @_;
    my $v = $r->{headers}{ lc $name };
    return ref $v ? join(', ', @$v) : $v;
}

# 'RateLimit: "api";r=3;t=17, "b";r=1;t=2' -> ({ name => 'api', r => 3, t => 17 }, ...)
sub parse_ratelimit { _parse_sf_list(@_) }

# 'RateLimit-Policy: "api";q=10;w=60' -> ({ name => 'api', q => 10, w => 60 }, ...)
sub parse_policy { _parse_sf_list(@_) }

sub _parse_sf_list {
    my ($s) = @_;
    return () unless defined $s;
    my @out;
    for my $m (split /\s*,\s*/, $s) {
        $m =~ s/^\s+|\s+$//g;
        my ($name, @params) = split /;/, $m;
        my %h = (raw => $m);
        if (defined $name && $name =~ /^"(.*)"$/) { $h{name} = $1 }
        else { $h{name} = $name; $h{bad_name} = 1 }
        for (@params) {
            my ($k, $v) = split /=/, $_, 2;
            $h{$k} = $v;
        }
        push @out, \%h;
    }
    return @out;
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

# ---------------------------------------------------------------------------
# more Redis processes (replicas, sentinels, a second server on another
# address) and a one-shot client for any of them

# start_redis_server(name => 'replica', port => P, bind => '127.0.0.1',
#                    args => [...], conf => $text, sentinel => 1, auth => [pw])
# Starts redis-server (with conf => ..., a config file TMP/NAME.conf, which a
# sentinel needs writable) in its own process group, registered for cleanup,
# and waits until it answers PING on bind:port (sending AUTH @auth first if
# given).  Returns the pid.  Its output goes to TMP/NAME.out.
sub start_redis_server {
    my ($self, %o) = @_;
    my $name = $o{name} // 'redis2';
    my $bind = $o{bind} // '127.0.0.1';
    my $port = $o{port} // die "start_redis_server: port needed";
    my @cmd = (redis_bin());
    if (defined $o{conf}) {
        my $cf = "$self->{tmp}/$name.conf";
        _write_file($cf, $o{conf});
        chmod 0644, $cf;
        push @cmd, $cf;
    }
    push @cmd, '--sentinel' if $o{sentinel};
    push @cmd, '--port', $port, '--bind', $bind, '--daemonize', 'no', '--dir', $self->{tmp},
        '--protected-mode', 'no', '--loglevel', 'notice';
    push @cmd, '--save', '', '--appendonly', 'no', _module_args($o{redis_module}) unless $o{sentinel};
    push @cmd, @{ $o{args} } if $o{args};
    my $out = "$self->{tmp}/$name.out";
    my $pid = $self->_spawn($name, $out, @cmd);
    my $deadline = time + 5;
    while (1) {
        if (!_alive($pid)) {
            die "$name exited at start:\n" . _read_file($out);
        }
        my $r = eval { redis_at({ host => $bind, port => $port, auth => $o{auth} }, 'PING') };
        last if defined $r && !ref $r && $r eq 'PONG';
        die "$name did not answer PING within 5s:\n" . _read_file($out) if time > $deadline;
        sleep 0.05;
    }
    return $pid;
}

# Stops a process started here (start_redis_server, start_child): $sig
# (default TERM), then SIGKILL of its group after $timeout (default 5) s.
# True if it exited by itself.
sub stop_process {
    my ($self, $pid, $sig, $timeout) = @_;
    return 1 unless $pid;
    return _terminate($pid, $sig // 'TERM', $timeout // 5);
}

# Runs a forked child (its own process group, registered for cleanup) that
# calls $code->() and exits.  Returns the pid.
sub start_child {
    my ($self, $desc, $code) = @_;
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if ($pid == 0) {
        POSIX::setpgid(0, 0);
        eval { $code->(); 1 } or print STDERR "$desc: $@";
        POSIX::_exit(0);
    }
    POSIX::setpgid($pid, $pid);
    $CHILDREN{$pid} = $desc;
    return $pid;
}

# redis_at({ host => '127.0.0.1', port => P, auth => [user, pw] | [pw], timeout => 2 }, @argv)
# One command on a fresh connection; reply as for redis().  Dies when it
# cannot connect, or when AUTH is refused.
sub redis_at {
    my ($c, @argv) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => $c->{host} // '127.0.0.1', PeerPort => $c->{port},
        Proto => 'tcp', Timeout => $c->{timeout} // 2)
        or die "cannot connect to redis at " . ($c->{host} // '127.0.0.1') . ":$c->{port}: $!\n";
    binmode $s;
    my $cl = bless { rsock => $s, rbuf => '' }, 'RateLimitTest';
    if ($c->{auth}) {
        my $a = $cl->_redis_cmd('AUTH', @{ $c->{auth} });
        if (is_redis_error($a)) { close $s; die "redis AUTH failed: $$a\n" }
    }
    my $r = eval { $cl->_redis_cmd(@argv) };
    my $e = $@;
    close $s;
    die $e if $e;
    return $r;
}

1;
