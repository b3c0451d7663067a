package SentinelTest;

# Redis Sentinel on loopback for the tests: data nodes (a master and its
# replicas) and sentinels monitoring them, all started through a
# RateLimitTest harness (own process groups, killed with the rest).
#
#   my $s = SentinelTest->new($t, nodes => ['A', 'B'], sentinels => 3, quorum => 2,
#       down_after => 500, failover_timeout => 3000,
#       data_pass => 'x', sentinel_pass => 'y');     # both optional
#   $s->start;                    # A master, B... replicas of A, then the sentinels
#   $s->wait_ready(10)            # every sentinel knows the replicas and the others
#   $s->port('A'), $s->sentinel_ports, $s->master_name ('mymaster')
#   $s->node('A', @argv)          one command to a data node (AUTH as needed)
#   $s->sentinel($i, @argv)       one command to sentinel $i (0-based)
#   $s->role('A')                 'master' / 'slave' / undef (down)
#   $s->master_addr($i)           "IP:PORT" sentinel $i gives for the master
#   $s->kill_node('A'[, 'KILL'])  stop a data node (SIGKILL by default)
#   $s->start_node('A'[, replicaof => 'B'])
#   $s->wait_role('B', 'master', $timeout)   time it got there, or undef
#   $s->wait_sentinels_say($port, $timeout)  time when all sentinels give it
#   $s->wait_synced('A', $timeout)           a replica with master_link_status:up

use strict;
use warnings;
use RateLimitTest;

sub new {
    my ($class, $t, %o) = @_;
    my $self = bless {
        t => $t,
        nodes => $o{nodes} // ['A', 'B'],
        n_sentinels => $o{sentinels} // 3,
        quorum => $o{quorum} // 2,
        down_after => $o{down_after} // 500,
        failover_timeout => $o{failover_timeout} // 3000,
        data_pass => $o{data_pass},
        sentinel_pass => $o{sentinel_pass},
        name => $o{master_name} // 'mymaster',
        pids => {},
    }, $class;
    $self->{ports}{$_} = $t->port("SENT_NODE_$_") for @{ $self->{nodes} };
    $self->{sports} = [ map { $t->port("SENT_S$_") } 1 .. $self->{n_sentinels} ];
    return $self;
}

sub master_name { $_[0]{name} }
sub port { $_[0]{ports}{ $_[1] } // die "no node $_[1]" }
sub sentinel_ports { @{ $_[0]{sports} } }

sub _data_auth { defined $_[0]{data_pass} ? [ $_[0]{data_pass} ] : undef }
sub _sent_auth { defined $_[0]{sentinel_pass} ? [ $_[0]{sentinel_pass} ] : undef }

sub node {
    my ($self, $name, @argv) = @_;
    return RateLimitTest::redis_at({ port => $self->port($name), auth => $self->_data_auth }, @argv);
}

sub sentinel {
    my ($self, $i, @argv) = @_;
    return RateLimitTest::redis_at({ port => $self->{sports}[$i], auth => $self->_sent_auth }, @argv);
}

sub start {
    my ($self) = @_;
    my ($first, @rest) = @{ $self->{nodes} };
    $self->start_node($first);
    $self->start_node($_, replicaof => $first) for @rest;
    $self->wait_synced($_, 10) or die "replica $_ did not sync" for @rest;
    $self->start_sentinel($_) for 0 .. $self->{n_sentinels} - 1;
    return $self;
}

sub start_node {
    my ($self, $name, %o) = @_;
    my @args = ('--repl-diskless-sync-delay', 0, '--repl-ping-replica-period', 1);
    push @args, '--requirepass', $self->{data_pass}, '--masterauth', $self->{data_pass}
        if defined $self->{data_pass};
    push @args, '--replicaof', '127.0.0.1', $self->port($o{replicaof}) if $o{replicaof};
    $self->{pids}{$name} = $self->{t}->start_redis_server(
        name => "node$name", port => $self->port($name), args => \@args, auth => $self->_data_auth);
}

sub kill_node {
    my ($self, $name, $sig) = @_;
    my $pid = delete $self->{pids}{$name} or return;
    $self->{t}->stop_process($pid, $sig // 'KILL', 3);
}

sub node_pid { $_[0]{pids}{ $_[1] } }

sub start_sentinel {
    my ($self, $i) = @_;
    my $n = $self->{name};
    my ($master) = @{ $self->{nodes} };
    my $conf = "sentinel monitor $n 127.0.0.1 " . $self->port($master) . " $self->{quorum}\n"
        . "sentinel down-after-milliseconds $n $self->{down_after}\n"
        . "sentinel failover-timeout $n $self->{failover_timeout}\n"
        . "sentinel parallel-syncs $n 1\n";
    $conf .= "sentinel auth-pass $n $self->{data_pass}\n" if defined $self->{data_pass};
    $conf .= "requirepass $self->{sentinel_pass}\n" if defined $self->{sentinel_pass};
    $self->{spids}[$i] = $self->{t}->start_redis_server(
        name => "sentinel$i", port => $self->{sports}[$i], conf => $conf, sentinel => 1,
        auth => $self->_sent_auth);
}

sub role {
    my ($self, $name) = @_;
    my $r = eval { $self->node($name, 'ROLE') };
    return ref $r eq 'ARRAY' ? $r->[0] : undef;
}

sub master_addr {
    my ($self, $i) = @_;
    my $r = eval { $self->sentinel($i, 'SENTINEL', 'get-master-addr-by-name', $self->{name}) };
    return ref $r eq 'ARRAY' ? "$r->[0]:$r->[1]" : undef;
}

# SENTINEL MASTER as a hash (for one sentinel).
sub master_info {
    my ($self, $i) = @_;
    my $r = eval { $self->sentinel($i, 'SENTINEL', 'MASTER', $self->{name}) };
    return ref $r eq 'ARRAY' ? { @$r } : {};
}

sub wait_role {
    my ($self, $name, $role, $timeout) = @_;
    return RateLimitTest::wait_until(sub { ($self->role($name) // '') eq $role }, $timeout);
}

sub wait_synced {
    my ($self, $name, $timeout) = @_;
    return RateLimitTest::wait_until(sub {
        my $i = eval { $self->node($name, 'INFO', 'replication') } // '';
        $i =~ /^master_link_status:up/m;
    }, $timeout);
}

sub wait_sentinels_say {
    my ($self, $port, $timeout) = @_;
    return RateLimitTest::wait_until(sub {
        !grep { ($self->master_addr($_) // '') ne "127.0.0.1:$port" } 0 .. $self->{n_sentinels} - 1;
    }, $timeout);
}

# Every sentinel knows all replicas (up) and all other sentinels.
sub wait_ready {
    my ($self, $timeout) = @_;
    my $want_rep = @{ $self->{nodes} } - 1;
    my $want_s = $self->{n_sentinels} - 1;
    return RateLimitTest::wait_until(sub {
        for my $i (0 .. $self->{n_sentinels} - 1) {
            my $m = $self->master_info($i);
            return 0 unless ($m->{'num-slaves'} // -1) == $want_rep
                && ($m->{'num-other-sentinels'} // -1) == $want_s
                && ($m->{flags} // '') eq 'master';
        }
        1;
    }, $timeout);
}

1;
