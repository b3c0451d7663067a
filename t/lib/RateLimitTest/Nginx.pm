package RateLimitTest::Nginx;

# nginx: the configuration written around a test's http{} body (write_conf,
# expand), "nginx -t", start, reload, stop, and the worker pids.  Methods of
# RateLimitTest (it inherits them).

use strict;
use warnings;

use POSIX qw(:sys_wait_h);
use Time::HiRes qw(time sleep);
use RateLimitTest::Env qw(module_path nginx_bin slow _read_file _write_file);
use RateLimitTest::Process qw(_alive _terminate _children_of _port_open);

# Writes TMP/nginx.conf. Options:
#   workers => N        worker_processes (default: new()'s workers)
#   no_module => 1      do not emit load_module / the ratelimit log_format (plain nginx)
#   module => path      load this build of the module (another release) in
#                       place of RATELIMIT_MODULE's
#   main => '...'       extra main-context directives
#   access_log_format   log_format used for TMP/access.log (default "rltest")
sub write_conf {
    my ($self, $body, %o) = @_;
    my $tmp = $self->{tmp};
    my $workers = $o{workers} // $self->{workers};
    my $conf = '';
    $conf .= "load_module " . ($o{module} // module_path()) . ";\n"
        unless $o{no_module};
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

# start_nginx(clock => 1): on the test's clock (RateLimitTest::clock); the
# workers a reload starts too, forked by the master.
sub start_nginx {
    my ($self, %o) = @_;
    die "nginx already running" if $self->{nginx_pid};
    my $tmp = $self->{tmp};
    my $env = $self->clock_env($o{clock});
    local @ENV{keys %$env} = values %$env;
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

1;
