#!/usr/bin/perl
# The name each Redis's certificate is checked against, with TLS and
# ratelimit_redis_ssl_verify on: a Redis Cluster of three masters on
# 127.0.0.1, 127.0.0.2 and 127.0.0.3 (bind and cluster-announce-ip), each
# with a certificate for its own IP address only; a master on 127.0.0.2
# named by a sentinel on 127.0.0.1; one Redis on ::1.
#
# Expected (spec): without ratelimit_redis_ssl_name each node (a seed, or
# one the slot map names) is checked against its own address: subjects on
# all three masters are limited exactly, their keys on their masters; a
# node whose certificate is for another address is refused (the log says
# the certificate does not match its address; its subjects get the fail
# policy, nothing is counted there) while the others stay exact; with
# ratelimit_redis_ssl_name every node is checked against that name.  A
# sentinel-named master is checked against the address the sentinel gives,
# each sentinel against its own configured address; a server written
# "[::1]:PORT" against the IP address ::1.  No [alert], no crashed worker.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use FaultTest qw(raw_get rhdr sr);
use RateLimitTest qw(fail_policy_http);
use ClusterTest;
use TestCerts;
use IO::Socket::IP;

RateLimitTest::require_module();

my $WORKERS = 2;
my $LIMIT = 5;
my $t = FaultTest->new(workers => $WORKERS);
my $tmp = $t->tmp;
my $pki = TestCerts->new("$tmp/pki");
my @IP = ('127.0.0.1', '127.0.0.2', '127.0.0.3');
my %CERT = map { ($_ + 1) => [ $pki->leaf("node$_", "IP:$IP[$_]") ] } 0 .. 2;
my $SSL = "ratelimit_redis_ssl on;\nratelimit_redis_ssl_trusted_certificate $pki->{ca};\n"
    . "ratelimit_redis_ssl_verify on;\n";

sub key { ClusterTest::subject_key('rl', 'api', $_[0]) }

sub ratelimit_lines { join "\n", grep { /ratelimit/ } split /\n/, $t->error_log }

# nginx (again) with these ratelimit_redis and TLS lines.
sub start_nginx_with {
    my ($name, $redis) = @_;
    $t->stop_nginx;
    unlink "$tmp/error.log", "$tmp/access.log";
    $t->write_conf(fail_policy_http("$redis timeout=200ms connect_timeout=500ms;\n$SSL", limit => $LIMIT));
    my ($st, $out) = $t->nginx_t;
    is($st, 0, "$name: nginx -t passes") or do { diag($out); return 0 };
    return eval { $t->start_nginx; 1 } || do { fail("$name: nginx starts: $@"); 0 };
}

# ---------------------------------------------------------------------------
# a cluster of three masters, each on its own address with a certificate for
# that address only

my $c = ClusterTest->new($t, masters => 3, replicas => 0, node_timeout => 1000, tls => $pki,
    hosts => \@IP, tls_cert => \%CERT);
my $t_start = time;
$c->start(20);
my @P = $c->ports;
my @M = $c->masters;
is(join(' ', sort map { $c->host($_->{port}) } @M), "@IP",
    sprintf('TLS cluster of 3 masters on 3 addresses up in %.1fs', time - $t_start));
my $ANNOUNCED = $c->node($P[1], 'CLUSTER', 'SLOTS');
is(join(' ', sort map { $_->[2][0] } @$ANNOUNCED), "@IP", 'CLUSTER SLOTS names each master by its own address');

# Subjects on one master until one passes: the worker connected to it.
sub wait_up_on {
    my ($port, $tag) = @_;
    my $r;
    for (1 .. 60) {
        $r = $t->req('closed', $c->key_in($port, $tag, 'api'), 3);
        return 1 if sr($r) eq '200/PASSED';
        sleep 0.05;
    }
    diag('last: ' . sr($r) . "\n" . ratelimit_lines());
    return 0;
}

if (start_nginx_with('cluster, no ssl_name', "ratelimit_redis cluster " . $c->seeds)) {
    for my $i (0 .. 2) {
        ok(wait_up_on($P[$i], "up$i"), "a subject on the master at $IP[$i] passes (its certificate is for $IP[$i])");
    }
    my @subj = map { $c->key_in($P[$_ % 3], 'own', 'api') } 0 .. 23;
    $t->exact_each([$t], \@subj, $LIMIT, 3, '/closed/index.html',
        '24 subjects on the three masters x ' . ($LIMIT + 3) . " at once: exactly $LIMIT passed each, 3 got 429");
    for my $i (0 .. 2) {
        my @here = grep { $c->master_of(key($_)) == $P[$i] } @subj;
        my @counted = grep { ($c->window_count_on($P[$i], key($_)) // -1) == $LIMIT } @here;
        is(scalar @counted, scalar @here, "the keys of the 8 subjects on $IP[$i] are on that master, at $LIMIT")
            or diag("@here");
    }
    is($t->count_log(qr/certificate/), 0, 'no certificate failure logged') or diag(ratelimit_lines());
    $t->stop_and_check('cluster, no ssl_name');
}

# --- a node whose certificate is for another address -------------------------------

my ($P3, $T3) = ($P[2], $c->tls_port($P[2]));
is($c->node($P3, 'CONFIG', 'SET', 'tls-cert-file', $CERT{2}[0], 'tls-key-file', $CERT{2}[1]), 'OK',
    "the node at $IP[2] now serves the certificate for $IP[1]");
if (start_nginx_with('cluster, a certificate for another address', "ratelimit_redis cluster " . $c->seeds)) {
    ok(wait_up_on($P[0], 'up-b0') && wait_up_on($P[1], 'up-b1'), "subjects on $IP[0] and $IP[1] pass");
    my @bad = map { $c->key_in($P3, 'bad', 'api') } 1 .. 4;
    my @closed = map { $t->req('closed', $_) } @bad;
    my @open = map { $t->req('open', $_) } @bad;
    is(join(' ', map { sr($_) } @closed, @open), join(' ', ('503/ERROR') x 4, ('200/ERROR') x 4),
        "subjects on $IP[2]: the fail policy (closed 503, open 200, both ERROR)");
    ok($t->wait_log(qr/ratelimit: cannot connect to redis at "\Q$IP[2]\E:$T3": certificate does not match "\Q$IP[2]\E"/, 1, 3),
        "error.log: the certificate of $IP[2]:$T3 does not match \"$IP[2]\"") or diag(ratelimit_lines());
    is(scalar(grep { $c->node($P3, 'EXISTS', key($_)) } @bad), 0, "nothing counted on $IP[2]");
    my @good = map { $c->key_in($P[$_ % 2], 'still', 'api') } 0 .. 7;
    $t->exact_each([$t], \@good, $LIMIT, 2, '/closed/index.html', "meanwhile subjects on $IP[0] and $IP[1]: exact");
    is($t->count_log(qr/certificate does not match "(?!\Q$IP[2]\E")/), 0, 'no other node refused')
        or diag(ratelimit_lines());
    $t->stop_and_check('cluster, a certificate for another address');
}
is($c->node($P3, 'CONFIG', 'SET', 'tls-cert-file', $CERT{3}[0], 'tls-key-file', $CERT{3}[1]), 'OK',
    "the node at $IP[2] serves its own certificate again");

# --- ratelimit_redis_ssl_name: one name for every node --------------------------------

$SSL .= "ratelimit_redis_ssl_name $IP[0];\n";
if (start_nginx_with("cluster, ratelimit_redis_ssl_name $IP[0]", "ratelimit_redis cluster " . $c->seeds)) {
    ok(wait_up_on($P[0], 'up-n0'), "a subject on $IP[0] passes");
    my $r = $t->req('closed', $c->key_in($P[1], 'named', 'api'));
    is(sr($r), '503/ERROR', "a subject on $IP[1]: the fail policy");
    ok($t->wait_log(qr/ratelimit: cannot connect to redis at "\Q$IP[1]\E:\d+": certificate does not match "\Q$IP[0]\E"/, 1, 3),
        "error.log: the node at $IP[1] is checked against \"$IP[0]\"") or diag(ratelimit_lines());
    $t->stop_and_check("cluster, ratelimit_redis_ssl_name $IP[0]");
}
$SSL =~ s/ratelimit_redis_ssl_name [^\n]*\n//;

# ---------------------------------------------------------------------------
# a master on 127.0.0.2 named by a sentinel on 127.0.0.1

my ($MP, $MT) = ($t->port('MASTER_PORT'), $t->port('MASTER_TLS'));
$t->start_redis_server(name => 'master2', bind => $IP[1], port => $MP,
    args => [ $pki->redis_tls_args($MT), '--tls-cert-file', $CERT{2}[0], '--tls-key-file', $CERT{2}[1] ]);
my ($SP, $ST) = ($t->port('SENT_PLAIN'), $t->port('SENT_TLS'));
$t->start_redis_server(name => 'sentinel', port => $SP, sentinel => 1,
    conf => $pki->sentinel_tls_conf($ST) . "sentinel monitor tlsm $IP[1] $MT 1\n");
my $named = RateLimitTest::redis_at({ port => $SP }, 'SENTINEL', 'get-master-addr-by-name', 'tlsm');
is(ref $named ? "@$named" : $named, "$IP[1] $MT", "the sentinel names the master at $IP[1]");

# Limiting through the sentinels at $addresses, exact, counted on the master.
sub sentinel_works {
    my ($name, $addresses) = @_;
    start_nginx_with($name, "ratelimit_redis $addresses sentinel=tlsm") or return;
    my ($when, $r) = $t->wait_passed('closed', 'up-s', 5);
    ok(defined $when, "$name: PASSED") or diag('last: ' . sr($r) . "\n" . ratelimit_lines());
    ok($t->wait_log(qr/ratelimit: redis master "tlsm" is at \Q$IP[1]\E:$MT/, 1, 2),
        "$name: the workers found the master at $IP[1]") or diag(ratelimit_lines());
    my $key = "exact-$name";
    $key =~ s/\W/_/g;
    is($t->hammer([$t], $LIMIT + 4, '/closed/index.html', { 'X-Api-Key' => $key }), "$LIMIT/4/0",
        "$name: $LIMIT + 4 at once: exactly $LIMIT passed");
    is(RateLimitTest::window_count(sub { RateLimitTest::redis_at({ host => $IP[1], port => $MP }, @_) },
        "rl:api:$key"), $LIMIT,
        "$name: counted on the master");
    is($t->count_log(qr/certificate/), 0, "$name: no certificate failure logged") or diag(ratelimit_lines());
    $t->stop_and_check($name);
}

sentinel_works("sentinel on $IP[0], master on $IP[1] with a certificate for $IP[1] only", "$IP[0]:$ST");
# The first sentinel refuses the connection: the second is checked against its
# own address, not the first one's.
sentinel_works("a second sentinel, on $IP[0] after one on $IP[2]",
    "$IP[2]:" . $t->port('NO_SENTINEL') . " $IP[0]:$ST");

# ---------------------------------------------------------------------------
# the one server by its IPv6 address: the certificate's IP name is "::1",
# the address is written "[::1]"

SKIP: {
    skip 'no IPv6 loopback', 7 unless IO::Socket::IP->new(LocalHost => '::1', LocalPort => 0, Listen => 1);
    my ($P6, $T6) = ($t->port('V6_PORT'), $t->port('V6_TLS'));
    my @v6 = $pki->leaf('v6', 'IP:::1');
    $t->start_redis_server(name => 'v6', port => $P6,
        args => [ '--bind', '127.0.0.1 ::1', $pki->redis_tls_args($T6), '--tls-cert-file', $v6[0], '--tls-key-file', $v6[1] ]);
    my $name = 'the one server at [::1] with a certificate for ::1 only';
    start_nginx_with($name, "ratelimit_redis [::1]:$T6") or skip 'nginx did not start', 5;
    my ($when, $r) = $t->wait_passed('closed', 'up-v6', 5);
    ok(defined $when, "$name: PASSED") or diag('last: ' . sr($r) . "\n" . ratelimit_lines());
    is($t->hammer([$t], $LIMIT + 4, '/closed/index.html', { 'X-Api-Key' => 'exact-v6' }), "$LIMIT/4/0",
        "$name: $LIMIT + 4 at once: exactly $LIMIT passed");
    is($t->count_log(qr/certificate/), 0, "$name: no certificate failure logged") or diag(ratelimit_lines());
    $t->stop_and_check($name);
}

done_testing;
