package RateLimitTest::Redis;

# Redis: the test's own redis-server (start_redis, stop_redis), a small RESP
# client on it (redis, redis_db, redis_keys, ...), a window key's counts in
# either layout (read_window, redis_window, ...), more redis-servers
# (replicas, sentinels, other addresses: start_redis_server) and a one-shot
# client for any of them (redis_at).  Methods of RateLimitTest (it inherits
# them) and functions.  An error reply is a RateLimitTest::RedisError.

use strict;
use warnings;

use IO::Socket::INET;
use IO::Select;
use Time::HiRes qw(time sleep);
use Exporter 'import';
use RateLimitTest::Env qw(redis_bin _module_args _read_file _write_file);
use RateLimitTest::Process qw(_alive _terminate);

our @EXPORT_OK = qw(redis_at is_redis_error read_window window_count
    unpack_window bucket_sum);

sub redis_port { $_[0]->port('REDIS_PORT') }

# start_redis(port => P, requirepass => 'x', unixsocket => 1 | '/path', args => [...],
#             clock => 1)
# clock => 1: on the test's clock (RateLimitTest::clock).
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
    my $env = $self->clock_env($o{clock});
    local @ENV{keys %$env} = values %$env;
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

# A window key's fields as its hash has them (docs/operations.md "Redis data
# layout"), read from a hash or a packed string alike: `t` the window's
# count, `n` its newest bucket's number (a fixed window's number), `o` its
# oldest (sliding), and per live bucket its number => its count (sliding).
# $run->(@argv) runs one command where the key is.  {} without the key; for
# a key of neither layout (another type, a string of neither window's
# shape) Redis's error, or one saying the string's length.
sub read_window {
    my ($run, $key) = @_;
    my $v = $run->('GET', $key);
    if (is_redis_error($v)) {
        return $v unless "$v" =~ /^WRONGTYPE/;
        my $h = $run->('HGETALL', $key);
        return is_redis_error($h) ? $h : { @$h };
    }
    return defined $v ? unpack_window($v) : {};
}

# The integer format of a count of each width, in bytes.
my %COUNT_FORMAT = (1 => 'C', 2 => 'S<', 4 => 'L<', 8 => 'Q<');

# The fields of a packed string, little-endian: a fixed window's number and
# count (8 bytes each); a sliding window's width of a count (a byte), base
# bucket number (8 bytes), per live bucket, oldest first, its number less
# the base (2 bytes) and its count, and last its count (8 bytes).
sub unpack_window {
    my ($s) = @_;
    my $len = length $s;
    if ($len == 16) {
        my ($n, $t) = unpack('Q< Q<', $s);
        return { t => $t, n => $n };
    }
    my $width = $len ? ord $s : 0;
    my $format = $COUNT_FORMAT{$width};
    my $live = $format ? ($len - 17) / (2 + $width) : 0;
    if ($live < 1 || $live != int $live) {
        return bless \(my $e = "not a window's string ($len bytes)"),
            'RateLimitTest::RedisError';
    }
    my ($base, @entries) = unpack("x Q< (S< $format)$live Q<", $s);
    my %w = (t => pop @entries);
    while (my ($offset, $count) = splice @entries, 0, 2) {
        $w{ $base + $offset } = $count;
        $w{o} //= $base + $offset;
        $w{n} = $base + $offset;
    }
    return \%w;
}

# The sum of a window's bucket counts (a fixed window's count: `t`), from
# its fields (read_window); a field of a bucket holding no integer counts 0.
sub bucket_sum {
    my ($w) = @_;
    my @buckets = grep { /^\d+$/ } keys %$w;
    return $w->{t} // 0 unless @buckets;
    my $sum = 0;
    for (@$w{@buckets}) { $sum += $_ if /^-?\d+$/ }
    return $sum;
}

# A command on the test's Redis, in db $db if given: read_window's $run.
sub _in_db {
    my ($self, $db) = @_;
    return sub { defined $db ? $self->redis_db($db, @_) : $self->redis(@_) };
}

# read_window of the test's Redis.
sub redis_window {
    my ($self, $key, $db) = @_;
    return read_window($self->_in_db($db), $key);
}

# The count stored in a window key (its field `t`) through $run, as
# read_window: undef without the key, the error for a key of neither layout.
sub window_count {
    my ($run, $key) = @_;
    my $w = read_window($run, $key);
    return is_redis_error($w) ? $w : $w->{t};
}

# window_count of the test's Redis.
sub redis_window_count {
    my ($self, $key, $db) = @_;
    return window_count($self->_in_db($db), $key);
}

# The sum of the window's bucket counts (bucket_sum): 0 without the key,
# undef for a key of neither layout.
sub redis_window_total {
    my ($self, $key, $db) = @_;
    my $w = $self->redis_window($key, $db);
    return is_redis_error($w) ? undef : bucket_sum($w);
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

package RateLimitTest::Redis;


# ---------------------------------------------------------------------------
# more Redis processes (replicas, sentinels, a second server on another
# address) and a one-shot client for any of them

# start_redis_server(name => 'replica', port => P, bind => '127.0.0.1',
#                    args => [...], conf => $text, sentinel => 1, auth => [pw],
#                    clock => 1)
# Starts redis-server (with conf => ..., a config file TMP/NAME.conf, which a
# sentinel needs writable) in its own process group, registered for cleanup,
# and waits until it answers PING on bind:port (sending AUTH @auth first if
# given), on the test's clock with clock => 1.  Returns the pid.  Its output
# goes to TMP/NAME.out.
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
    my $env = $self->clock_env($o{clock});
    local @ENV{keys %$env} = values %$env;
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

# One command on a fresh connection; reply as for redis().  Dies when it
# cannot connect, or when AUTH is refused.
sub redis_at {
    my ($c, @argv) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => $c->{host} // '127.0.0.1', PeerPort => $c->{port},
        Proto => 'tcp', Timeout => $c->{timeout} // 2)
        or die "cannot connect to redis at " . ($c->{host} // '127.0.0.1') . ":$c->{port}: $!\n";
    binmode $s;
    my $cl = bless { rsock => $s, rbuf => '' }, __PACKAGE__;
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
