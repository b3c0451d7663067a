package RateLimitTest::HTTP;

# HTTP clients against the test's nginx: one GET (get), several requests over
# one connection (raw_exchange), many forked clients at once (parallel_get);
# and reading responses: header / hdr, the RateLimit and RateLimit-Policy
# structured fields.  Methods of RateLimitTest (it inherits them) and
# functions.

use strict;
use warnings;

use IO::Socket::INET;
use IO::Select;
use HTTP::Tiny;
use POSIX ();
use Time::HiRes qw(time sleep);
use Exporter 'import';
use RateLimitTest::Env qw(slow _read_file _write_file);
use RateLimitTest::Process ();

our @EXPORT_OK = qw(header hdr parse_ratelimit parse_policy);

sub url {
    my ($self, $path, $port) = @_;
    return "http://127.0.0.1:" . ($port // $self->port('PORT')) . $path;
}

# GET /$loc/index.html as subject $key (header X-Api-Key).
sub get_as {
    my ($self, $loc, $key) = @_;
    return $self->get("/$loc/index.html", { "X-Api-Key" => $key });
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
#   or requests_for => sub { my ($client, $i) = @_; return ($path, \%headers[, $port]) }
#   ($port: another nginx's, e.g. a second server's; default this one's)
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
                    my ($path, $h, $port) = $o{requests_for} ? $o{requests_for}->($c, $i) : ($o{path}, $o{headers});
                    my $r = $ua->get($self->url($path, $port), { headers => $h // {} });
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
        $RateLimitTest::Process::CHILDREN{$pid} = 'client';
        push @pids, $pid;
    }
    my @res;
    for my $pid (@pids) {
        waitpid($pid, 0);
        delete $RateLimitTest::Process::CHILDREN{$pid};
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

# hdr($r, $name): header() under the short name the tests use.
sub hdr { header(@_) }

1;
