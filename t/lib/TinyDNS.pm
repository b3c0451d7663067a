package TinyDNS;

# A tiny authoritative DNS server over UDP in core Perl, for nginx's
# `resolver`.  It answers A queries for the names it is given (one address
# each, switchable while it runs), AAAA queries for those names with no
# records (NOERROR), anything else with NXDOMAIN.  It runs in a forked child
# registered with the RateLimitTest harness (killed with the rest).
#
#   my $dns = TinyDNS->start($t, records => { 'redis.test' => '127.0.0.1' }, ttl => 1);
#   $dns->port                      UDP port on 127.0.0.1
#   $dns->set('redis.test', '127.0.0.2')   later queries get the new address
#   $dns->remove('redis.test')             later queries get NXDOMAIN
#   $dns->queries('redis.test'[, 'A'])     how many queries it received
#   $dns->last_query('redis.test')         when the last one came (epoch s)
#   $dns->stop
#   TinyDNS::query($port, $name[, $type])  a client: list of addresses, or
#                                          ('NXDOMAIN') / () on no answer

use strict;
use warnings;
use IO::Socket::INET;
use IO::Select;
use POSIX ();
use Time::HiRes qw(time sleep);

my %TYPE = (A => 1, AAAA => 28);
my %TYPE_NAME = reverse %TYPE;

sub start {
    my ($class, $t, %o) = @_;
    my $dir = $t->tmp;
    my $self = bless {
        t => $t, ttl => $o{ttl} // 1,
        records_file => "$dir/dns.records", log_file => "$dir/dns.queries",
        records => { %{ $o{records} // {} } },
    }, $class;
    $self->_write_records;
    open my $lf, '>', $self->{log_file} or die "$self->{log_file}: $!";
    close $lf;
    # bind in the parent so the port is known and ready before the fork
    my $sock = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $o{port} // 0,
        Proto => 'udp') or die "TinyDNS: cannot bind udp: $!";
    $self->{port} = $sock->sockport;
    $self->{pid} = $t->start_child('tiny dns', sub { $self->_serve($sock) });
    close $sock;
    return $self;
}

sub port { $_[0]{port} }

sub set {
    my ($self, $name, $addr) = @_;
    $self->{records}{ lc $name } = $addr;
    $self->_write_records;
}

sub remove {
    my ($self, $name) = @_;
    delete $self->{records}{ lc $name };
    $self->_write_records;
}

sub _write_records {
    my ($self) = @_;
    my $tmp = "$self->{records_file}.new";
    open my $fh, '>', $tmp or die "$tmp: $!";
    print {$fh} map { lc($_) . " $self->{records}{$_}\n" } sort keys %{ $self->{records} };
    close $fh;
    rename $tmp, $self->{records_file} or die "rename: $!";
}

sub _read_records {
    my ($self) = @_;
    my %r;
    open my $fh, '<', $self->{records_file} or return \%r;
    while (<$fh>) { $r{$1} = $2 if /^(\S+) (\S+)$/ }
    return \%r;
}

sub queries {
    my ($self, $name, $type) = @_;
    open my $fh, '<', $self->{log_file} or return 0;
    my $n = 0;
    while (<$fh>) {
        my ($qt, $qn) = split;
        next unless defined $qn;
        $n++ if lc $qn eq lc $name && (!defined $type || $qt eq $type);
    }
    return $n;
}

# Time of the last query for $name (undef if none).
sub last_query {
    my ($self, $name) = @_;
    open my $fh, '<', $self->{log_file} or return undef;
    my $last;
    while (<$fh>) {
        my ($qt, $qn, $ans, $when) = split;
        $last = $when if defined $when && lc $qn eq lc $name;
    }
    return $last;
}

sub stop {
    my ($self) = @_;
    my $pid = delete $self->{pid} or return;
    $self->{t}->stop_process($pid, 'TERM', 2);
}

# ---------------------------------------------------------------------------
# the server (in the child)

sub _serve {
    my ($self, $sock) = @_;
    my $parent = getppid;
    my $sel = IO::Select->new($sock);
    open my $log, '>>', $self->{log_file} or die "$self->{log_file}: $!";
    $log->autoflush(1);
    while (1) {
        last if getppid != $parent;    # the test is gone
        next unless $sel->can_read(0.5);
        my $peer = recv($sock, my $q, 4096, 0);
        next unless defined $peer && length $q >= 12;
        my ($name, $qtype, $qend) = _parse_question($q);
        next unless defined $name;
        my $rec = $self->_read_records;
        my $addr = $rec->{ lc $name };
        # "TYPE NAME ANSWER TIME" (ANSWER: the A record, or - / NXDOMAIN)
        printf {$log} "%s %s %s %.3f\n", ($TYPE_NAME{$qtype} // $qtype), $name,
            (defined $addr ? ($qtype == $TYPE{A} ? $addr : '-') : 'NXDOMAIN'), time;
        my ($id, $qflags) = unpack 'n n', $q;
        my $rcode = defined $addr ? 0 : 3;    # NXDOMAIN for unknown names
        my @ans;
        if (defined $addr && $qtype == $TYPE{A}) {
            push @ans, pack('n n n N n', 0xC00C, 1, 1, $self->{ttl}, 4)
                . pack('C4', split /\./, $addr);
        }
        my $flags = 0x8000 | 0x0400 | ($qflags & 0x0100) | 0x0080 | $rcode;    # QR AA RD RA
        my $resp = pack('n6', $id, $flags, 1, scalar @ans, 0, 0)
            . substr($q, 12, $qend - 12) . join('', @ans);
        send($sock, $resp, 0, $peer);
    }
}

# (name, qtype, offset after the question) of a query; undef if malformed.
sub _parse_question {
    my ($q) = @_;
    my $off = 12;
    my @labels;
    while (1) {
        return if $off >= length $q;
        my $len = ord substr($q, $off, 1);
        $off++;
        last if $len == 0;
        return if $len > 63 || $off + $len > length $q;
        push @labels, substr($q, $off, $len);
        $off += $len;
    }
    return if $off + 4 > length $q;
    my ($qtype) = unpack 'n', substr($q, $off, 2);
    return (join('.', @labels), $qtype, $off + 4);
}

# ---------------------------------------------------------------------------
# a client, to check the server by itself

sub query {
    my ($port, $name, $type) = @_;
    $type //= 'A';
    my $id = int rand 65536;
    my $q = pack('n6', $id, 0x0100, 1, 0, 0, 0)
        . join('', map { chr(length $_) . $_ } split /\./, $name) . "\0"
        . pack('n n', $TYPE{$type}, 1);
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'udp')
        or die "udp: $!";
    send($s, $q, 0) or die "send: $!";
    return () unless IO::Select->new($s)->can_read(2);
    recv($s, my $r, 4096, 0);
    my ($rid, $flags, $qd, $an) = unpack 'n4', $r;
    return () unless $rid == $id;
    return ('NXDOMAIN') if ($flags & 0xF) == 3;
    my (undef, undef, $off) = _parse_question($r);
    my @out;
    for (1 .. $an) {
        # the answers here always use a pointer to the question's name
        my ($ptr, $t, $c, $ttl, $len) = unpack 'n n n N n', substr($r, $off, 12);
        $off += 12;
        push @out, join('.', unpack 'C4', substr($r, $off, 4)) if $t == 1 && $len == 4;
        $off += $len;
    }
    return @out;
}

1;
