package ClusterTest;

# Redis Cluster on loopback for the tests: N masters with R replicas each,
# built with `redis-cli --cluster create`, every node started through a
# RateLimitTest harness (own process group, killed with the rest), plus a
# small cluster-aware client that reads keys from whichever master holds them.
#
#   my $c = ClusterTest->new($t, masters => 3, replicas => 1, node_timeout => 1000,
#       tls => $pki,              # TestCerts: TLS ports, --tls-cluster yes
#       tls_trust => $bundle,     # CA file of the nodes (default $pki->{ca})
#       tls_cert => { 3 => [$cert, $key] },    # node 3 (1-based) serves that
#       redis_module => { 2 => 0 },    # node 2 without the Redis module, the
#                                      # others as RATELIMIT_REDIS_MODULE says
#       hosts => ['127.0.0.1', '127.0.0.2', ...]);  # node i (1-based) binds
#                                      # and announces the i-th (default
#                                      # 127.0.0.1 for every node)
#   $c->start(20);                # nodes up, cluster created, state ok everywhere
#   $c->seeds                     "127.0.0.1:P ..." for ratelimit_redis cluster
#                                 (the TLS ports with tls => ...)
#   $c->host($port)               the address a node binds and announces
#   ClusterTest::keyslot($key)    CRC16-XMODEM mod 16384, with hash tags
#   $c->nodes                     CLUSTER NODES as [{ id, port, role, master, slots }]
#                                 (port: the plain port, which the harness uses)
#   $c->masters                   the masters (not failed), by port
#   $c->master_of($key_or_slot)   plain port of the master serving it (a
#                                 cached map; $c->refresh after a change)
#   $c->node($port, @argv)        one command to one node (plain port)
#   $c->cmd($key, @argv)          one keyed command, MOVED / ASK followed
#   $c->window_total($key)        sum of a window key's bucket counts, either
#                                 layout (0 if absent; read_window)
#   $c->window_count_on($port, $key)   the count stored in a window key on
#                                 one node, either layout (window_count)
#   $c->key_in($master_port, $prefix)  a fresh name "$prefix-N" of a subject
#                                 whose hash-tagged key lands on that master
#                                 (see subject_key below; the fleet secret:
#                                 $c->{fleet_secret}, default none)
#   $c->reshard($from_port, $to_port, $slots)  redis-cli --cluster reshard;
#                                 (start, end) times
#   $c->wait_ok($timeout)         every live node: cluster_state:ok and the
#                                 same slot owners; the time, or undef
#   $c->wait_role($port, $role, $timeout)      ROLE of a node reaches $role
#   $c->kill_node($port[, $sig])  SIGKILL (default) a node
#   $c->pid($port), $c->tls_port($port)
#
#   ClusterTest::subject_key($prefix, $zone, $subject[, $secret])   the
#       module's key in cluster mode: PREFIX:ZONE:{TAG}SUBJECT, or
#       PREFIX:ZONE#{TAG}SHA1HEX past 256 bytes; TAG: 8 hex digits of
#       HMAC-SHA-1 of the subject under the tag key, HMAC-SHA-1 of
#       "ratelimit hash tag" under the fleet secret (default: no key)
#   ClusterTest::side_key($prefix, $zone, $subject[, $secret])   the
#       subject's side key (issue 41), beside its count key in its slot:
#       PREFIX:ZONE+:{TAG}SUBJECT, or PREFIX:ZONE+#{TAG}SHA1HEX
#   ClusterTest::marker_key($prefix, $zone, $slot)   the zone's marker in
#       that slot: PREFIX:ZONE+{N}, N the smallest number whose CRC16 falls
#       in the slot (the module's write_slot_tag())

use strict;
use warnings;
use Time::HiRes qw(time sleep);
use Digest::SHA qw(sha1_hex hmac_sha1 hmac_sha1_hex);
use IO::Socket::INET;
use RateLimitTest;

my @CRC16;
for my $i (0 .. 255) {
    my $crc = $i << 8;
    for (1 .. 8) {
        $crc = $crc & 0x8000 ? (($crc << 1) ^ 0x1021) & 0xffff : ($crc << 1) & 0xffff;
    }
    $CRC16[$i] = $crc;
}

sub crc16 {
    my ($s) = @_;
    my $crc = 0;
    $crc = (($crc << 8) & 0xffff) ^ $CRC16[(($crc >> 8) ^ $_) & 0xff] for unpack 'C*', $s;
    return $crc;
}

# Redis's rule: hash only what is between the first '{' and the first '}'
# after it, when that is not empty.
sub keyslot {
    my ($key) = @_;
    my $open = index($key, '{');
    if ($open >= 0) {
        my $close = index($key, '}', $open + 1);
        $key = substr($key, $open + 1, $close - $open - 1) if $close > $open + 1;
    }
    return crc16($key) % 16384;
}

sub subject_key {
    my ($prefix, $zone, $subject, $secret) = @_;
    my $tag_key = defined $secret ? hmac_sha1('ratelimit hash tag', $secret) : '';
    my $tag = '{' . substr(hmac_sha1_hex($subject, $tag_key), 0, 8) . '}';
    return length($subject) > 256 ? "$prefix:$zone#$tag" . sha1_hex($subject)
                                  : "$prefix:$zone:$tag$subject";
}

sub side_key {
    my ($prefix, $zone, $subject, $secret) = @_;
    my $key = subject_key($prefix, $zone, $subject, $secret);
    substr($key, length("$prefix:$zone"), 0) = '+';
    return $key;
}

my %slot_tag;

sub marker_key {
    my ($prefix, $zone, $slot) = @_;
    $slot_tag{$slot} //= do {
        my $n = 0;
        $n++ while crc16($n) % 16384 != $slot;
        $n;
    };
    return "$prefix:$zone+{$slot_tag{$slot}}";
}

sub new {
    my ($class, $t, %o) = @_;
    my $self = bless {
        t => $t,
        n_masters => $o{masters} // 3,
        n_replicas => $o{replicas} // 1,
        node_timeout => $o{node_timeout} // 1000,
        pki => $o{tls},
        trust => $o{tls_trust},
        cert_of => $o{tls_cert} // {},
        module_of => $o{redis_module} // {},
        hosts => $o{hosts} // [],
        pids => {},
        tls => {},
    }, $class;
    my $n = $self->{n_masters} * (1 + $self->{n_replicas});
    for my $i (1 .. $n) {
        my $p = $t->cluster_port("CLUSTER_NODE_$i");
        push @{ $self->{ports} }, $p;
        $self->{tls}{$p} = $t->cluster_port("CLUSTER_TLS_$i") if $self->{pki};
    }
    return $self;
}

sub ports { @{ $_[0]{ports} } }
sub tls_port { $_[0]{tls}{ $_[1] } }
sub pid { $_[0]{pids}{ $_[1] } }

# The address of the node on plain or TLS port $port.
sub host {
    my ($self, $port) = @_;
    my %plain = reverse %{ $self->{tls} };
    my $i = $self->_index($plain{$port} // $port);
    return (defined $i ? $self->{hosts}[ $i - 1 ] : undef) // '127.0.0.1';
}

# The addresses the module is given: TLS ports for a TLS cluster.
sub seeds {
    my ($self) = @_;
    return join ' ', map { $self->host($_) . ':' . ($self->{pki} ? $self->{tls}{$_} : $_) } $self->ports;
}

sub _tls_cli_args {
    my ($self) = @_;
    return () unless $self->{pki};
    return ('--tls', '--cacert', $self->{trust} // $self->{pki}{ca});
}

# A node's place (1-based) among the ports.
sub _index {
    my ($self, $port) = @_;
    my ($i) = grep { $self->{ports}[$_ - 1] == $port } 1 .. @{ $self->{ports} };
    return $i;
}

sub start_node {
    my ($self, $port) = @_;
    my $t = $self->{t};
    # files of their own in the shared directory: replicas write the RDB
    # they sync from
    my @args = ('--cluster-enabled', 'yes', '--cluster-config-file', "nodes-$port.conf",
        '--dbfilename', "dump-$port.rdb",
        '--cluster-node-timeout', $self->{node_timeout},
        '--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', 0,
        '--repl-ping-replica-period', 1);
    if (my $pki = $self->{pki}) {
        # nodes check each other's certificates on the bus (always) and on
        # replication links: they connect with a clientAuth certificate
        push @args, $pki->redis_tls_args($self->{tls}{$port}),
            '--tls-cluster', 'yes', '--tls-replication', 'yes',
            '--tls-client-cert-file', $pki->{client}, '--tls-client-key-file', $pki->{client_key};
        push @args, '--tls-ca-cert-file', $self->{trust} if $self->{trust};
        if (my $ck = $self->{cert_of}{ $self->_index($port) }) {
            push @args, '--tls-cert-file', $ck->[0], '--tls-key-file', $ck->[1];
        }
    }
    my $host = $self->host($port);
    push @args, '--cluster-announce-ip', $host if $host ne '127.0.0.1';
    $self->{pids}{$port} = $t->start_redis_server(name => "cnode$port", port => $port, args => \@args,
        bind => $host, redis_module => $self->{module_of}{ $self->_index($port) });
}

sub start {
    my ($self, $timeout) = @_;
    $timeout //= 20;
    my $t = $self->{t};
    $self->start_node($_) for $self->ports;
    my @addr = split / /, $self->seeds;
    my $out = $t->tmp . '/cluster-create.out';
    my @cmd = ('timeout', $timeout, 'redis-cli', $self->_tls_cli_args, '--cluster', 'create', @addr,
        '--cluster-replicas', $self->{n_replicas}, '--cluster-yes');
    system(join(' ', map { "'$_'" } @cmd) . " >'$out' 2>&1") == 0
        or die "redis-cli --cluster create failed:\n" . RateLimitTest::_read_file($out);
    defined $self->wait_ok($timeout) or die "cluster not ok after ${timeout}s:\n"
        . join("\n", map { "$_: " . ($self->_info($_) =~ /cluster_state:(\w+)/ ? $1 : '?') } $self->ports);
    for my $r (grep { $_->{role} eq 'slave' } $self->nodes) {
        RateLimitTest::wait_until(sub {
            (eval { $self->node($r->{port}, 'INFO', 'replication') } // '') =~ /^master_link_status:up/m
        }, $timeout) or die "replica $r->{port} did not sync";
    }
    return $self;
}

sub node {
    my ($self, $port, @argv) = @_;
    return RateLimitTest::redis_at({ host => $self->host($port), port => $port, timeout => 2 }, @argv);
}

sub _info {
    my ($self, $port) = @_;
    my $r = eval { $self->node($port, 'CLUSTER', 'INFO') };
    return defined $r && !ref $r ? $r : '';
}

sub live_ports {
    my ($self) = @_;
    return grep { $self->{pids}{$_} } $self->ports;
}

# CLUSTER NODES as seen by node $from (default: the first live node); ports
# are given back as the plain ports.
sub nodes {
    my ($self, $from) = @_;
    $from //= ($self->live_ports)[0];
    my %plain = reverse %{ $self->{tls} };
    my $text = $self->node($from, 'CLUSTER', 'NODES');
    die "CLUSTER NODES on $from: $text" if RateLimitTest::is_redis_error($text);
    my @n;
    for my $l (split /\n/, $text) {
        my ($id, $addr, $flags, $master, undef, undef, undef, undef, @slots) = split / /, $l;
        my ($port) = $addr =~ /:(\d+)@/ or next;
        $port = $plain{$port} // $port;
        my $role = $flags =~ /master/ ? 'master' : 'slave';
        my @ranges = map { /^(\d+)(?:-(\d+))?$/ ? [$1, $2 // $1] : () } @slots;
        push @n, { id => $id, port => $port, role => $role, flags => $flags,
            master => $master, slots => \@ranges, failed => scalar($flags =~ /fail/) };
    }
    return sort { $a->{port} <=> $b->{port} } @n;
}

sub masters {
    my ($self, $from) = @_;
    return grep { $_->{role} eq 'master' && !$_->{failed} && @{ $_->{slots} } } $self->nodes($from);
}

sub node_id {
    my ($self, $port) = @_;
    my ($n) = grep { $_->{port} == $port } $self->nodes;
    return $n ? $n->{id} : die "no node on port $port";
}

# slot -> plain port of its master, as node $from sees it
sub slot_owners {
    my ($self, $from) = @_;
    my %own;
    for my $m ($self->masters($from)) {
        for my $r (@{ $m->{slots} }) { $own{$_} = $m->{port} for $r->[0] .. $r->[1] }
    }
    return \%own;
}

# The slot map of cmd, master_of and key_in: read once, read again after a
# MOVED or a call of refresh.
sub refresh { delete $_[0]{own} }
sub _owners { $_[0]{own} //= $_[0]->slot_owners }

sub master_of {
    my ($self, $k) = @_;
    my $slot = $k =~ /^\d+$/ && $k < 16384 ? $k : keyslot($k);
    return $self->_owners->{$slot};
}

# Every live node says cluster_state:ok, knows all 16384 slots, and agrees
# with the others on who owns each.  Resets the cached slot map.
sub wait_ok {
    my ($self, $timeout) = @_;
    $self->refresh;
    return RateLimitTest::wait_until(sub {
        my $ref;
        for my $p ($self->live_ports) {
            return 0 unless $self->_info($p) =~ /^cluster_state:ok/m;
            my @m = eval { $self->masters($p) } or return 0;
            my @r = sort map { my $m = $_; map { "$_->[0]-$_->[1]:$m->{port}" } @{ $m->{slots} } } @m;
            my $n = 0;
            $n += $_->[1] - $_->[0] + 1 for map { @{ $_->{slots} } } @m;
            return 0 unless $n == 16384;
            $ref //= "@r";
            return 0 unless "@r" eq $ref;
        }
        $self->refresh;
        1;
    }, $timeout);
}

# One keyed command; follows MOVED and ASK (ASKING on the same connection).
sub cmd {
    my ($self, $key, @argv) = @_;
    my $port = $self->master_of($key);
    my $asking = 0;
    for (1 .. 5) {
        my $cl = bless { rsock => undef, rbuf => '' }, 'RateLimitTest';
        $cl->{rsock} = IO::Socket::INET->new(PeerAddr => $self->host($port), PeerPort => $port,
            Proto => 'tcp', Timeout => 2) or die "connect to $port: $!";
        binmode $cl->{rsock};
        $cl->_redis_cmd('ASKING') if $asking;
        my $r = $cl->_redis_cmd(@argv);
        close $cl->{rsock};
        return $r unless RateLimitTest::is_redis_error($r) && "$r" =~ /^(MOVED|ASK) \d+ [\d.]+:(\d+)/;
        ($asking, $port) = ($1 eq 'ASK', $2);
        $self->refresh unless $asking;
        my %plain = reverse %{ $self->{tls} };
        $port = $plain{$port} // $port;
    }
    die "too many redirects for $key";
}

sub window_total {
    my ($self, $key) = @_;
    my $w = RateLimitTest::read_window(sub { $self->cmd($key, @_) }, $key);
    die "$key: $w" if RateLimitTest::is_redis_error($w);
    return RateLimitTest::bucket_sum($w);
}

sub window_count_on {
    my ($self, $port, $key) = @_;
    return RateLimitTest::window_count(sub { $self->node($port, @_) }, $key);
}

sub key_in {
    my ($self, $port, $prefix, $zone, $key_prefix) = @_;
    my $own = $self->_owners;
    die "key_in: $port serves no slot\n" unless grep { $_ == $port } values %$own;
    $self->{serial}{$prefix} //= 0;
    while (1) {
        my $s = "$prefix-" . $self->{serial}{$prefix}++;
        return $s if $own->{ keyslot(subject_key($key_prefix // 'rl', $zone // 'z', $s, $self->{fleet_secret})) } == $port;
    }
}

sub reshard {
    my ($self, $from, $to, $slots) = @_;
    my ($fid, $tid) = ($self->node_id($from), $self->node_id($to));
    my $out = $self->{t}->tmp . '/cluster-reshard.out';
    my $t0 = time;
    my $rc = system("timeout 60 redis-cli --cluster reshard " . $self->host($from) . ":$from --cluster-from $fid --cluster-to $tid "
        . "--cluster-slots $slots --cluster-yes >>'$out' 2>&1");
    my $t1 = time;
    $self->refresh;
    die "redis-cli --cluster reshard failed:\n" . RateLimitTest::_read_file($out) if $rc;
    return ($t0, $t1);
}

sub role {
    my ($self, $port) = @_;
    my $r = eval { $self->node($port, 'ROLE') };
    return ref $r eq 'ARRAY' ? $r->[0] : undef;
}

# Waits until replica $port is ready for a manual failover (CLUSTER
# FAILOVER): its master lists it as its replica, and its replication link is
# up.  A master ignores the failover's request from a node it does not yet
# know as its replica (the cluster bus tells it some time after CLUSTER
# REPLICATE), and the replica gives the failover up after 5 s.
sub wait_failover_ready {
    my ($self, $port, $timeout) = @_;
    return RateLimitTest::wait_until(sub {
        my @mine = $self->nodes($port);
        my ($me) = grep { $_->{port} == $port } @mine;
        my ($m) = grep { $_->{id} eq ($me->{master} // '') } @mine;
        return 0 unless $me && $m;
        my ($seen) = grep { $_->{id} eq $me->{id} } $self->nodes($m->{port});
        return $seen && $seen->{role} eq 'slave' && $seen->{master} eq $me->{master}
            && ($self->node($port, 'INFO', 'replication') // '') =~ /^master_link_status:up/m;
    }, $timeout);
}

sub wait_role {
    my ($self, $port, $role, $timeout) = @_;
    return RateLimitTest::wait_until(sub { ($self->role($port) // '') eq $role }, $timeout);
}

sub kill_node {
    my ($self, $port, $sig) = @_;
    my $pid = delete $self->{pids}{$port} or return;
    $self->{t}->stop_process($pid, $sig // 'KILL', 3);
}

1;
