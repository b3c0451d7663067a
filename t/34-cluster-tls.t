#!/usr/bin/perl
# Redis Cluster over TLS: 6 nodes (3 masters, 3 replicas) with --tls-port,
# --tls-cluster yes and --tls-replication yes, announcing their TLS ports;
# two nginx servers (two workers each) given TLS seeds, one checking the
# nodes' certificates by IP address, one with ratelimit_redis_ssl_name.
# The third master serves a certificate of another CA (the nodes trust both
# CAs, nginx only the test root).
#
# Expected (spec): ratelimit_redis_ssl* apply to every node: the slot map
# comes over TLS, every connection of the workers goes to a TLS port; a
# hammer from both servers admits exactly the limit on subjects of the
# masters whose certificates verify; the master whose certificate does not
# verify is not used (fail policy, a log line naming it, nothing counted
# there); after a CLUSTER FAILOVER to its replica (a good certificate) its
# slots are exact again within 3 s; no [alert], no crashed worker.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use FaultTest qw(rhdr sr tally);
use ClusterTest;
use TestCerts;

RateLimitTest::require_module();

my $WORKERS = 2;
my $LIMIT = 5;
my $t1 = FaultTest->new(workers => $WORKERS);
my $t2 = FaultTest->new(workers => $WORKERS);
my @T = ($t1, $t2);
my $pki = TestCerts->new($t1->tmp . '/pki');
my $bundle = $t1->tmp . '/pki/both-cas.crt';
{
    open my $fh, '>', $bundle or die "$bundle: $!";
    print {$fh} map { RateLimitTest::_read_file($_) } $pki->{ca}, $pki->{other_ca};
    close $fh;
    chmod 0644, $bundle;
}

my $c = ClusterTest->new($t1, masters => 3, replicas => 1, node_timeout => 1000, tls => $pki,
    tls_trust => $bundle, tls_cert => { 3 => [ $pki->{stranger_server}, $pki->{stranger_server_key} ] });
my $t_start = time;
$c->start(20);
my @P = $c->ports;
my $STRANGER = $P[2];
# the stranger node must be a master: the replicas have good certificates
if ($c->role($STRANGER) ne 'master') {
    $c->wait_failover_ready($STRANGER, 10);
    $c->node($STRANGER, 'CLUSTER', 'FAILOVER');
    $c->wait_role($STRANGER, 'master', 5);
    $c->wait_ok(5);
}
my @M = $c->masters;
is(scalar @M, 3, sprintf('TLS cluster of 3 masters + 3 replicas up in %.1fs', time - $t_start));
is($c->role($STRANGER), 'master', 'the node with the other CA\'s certificate is a master');
my @GOOD = grep { $_ != $STRANGER } map { $_->{port} } @M;
my %TLS = map { $c->tls_port($_) => $_ } @P;
my $SEEDS = join ' ', map { '127.0.0.1:' . $c->tls_port($_) } @GOOD;

sub key { ClusterTest::subject_key('rl', @_) }

for my $i (0, 1) {
    my $name = $i ? "ratelimit_redis_ssl_name redis.test;\n" : '';
    $T[$i]->write_conf(<<"EOC" . <<'EOC2');
ratelimit_redis cluster $SEEDS timeout=200ms connect_timeout=500ms;
ratelimit_redis_ssl on;
ratelimit_redis_ssl_trusted_certificate $pki->{ca};
ratelimit_redis_ssl_verify on;
ratelimit_redis_ssl_verify_depth 2;
$name
ratelimit_zone api key=\$http_x_api_key limit=$LIMIT window=60s;
EOC
server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    location /closed/ { ratelimit zone=api; ratelimit_fail closed; alias %%TMP%%/html/; }
}
EOC2
    $T[$i]->start_nginx;
}

my $MAP = qr/ratelimit: redis cluster slot map from "127\.0\.0\.1:(\d+)": 3 masters/;
for my $i (0, 1) {
    my $t = $T[$i];
    my $r;
    for (1 .. 50) {
        $r = $t->req('closed', $c->key_in($GOOD[0], 'up', 'api'), 3);
        last if (rhdr($r, 'X-RL-Status') // '') eq 'PASSED';
        sleep 0.05;
    }
    is(sr($r), '200/PASSED', 'server ' . ($i + 1) . ($i ? ' (ssl_name redis.test)' : ' (verified by IP)') . ': PASSED through a TLS seed');
    my @from = $t->error_log =~ /$MAP/g;
    ok(@from && !(grep { !$TLS{$_} } @from), 'server ' . ($i + 1) . ': slot map loaded from TLS ports (' . join(' ', @from) . ')');
}

# --- exactness on the masters whose certificates verify ---------------------------

my @subj = map { $c->key_in($GOOD[$_ % 2], 'tls', 'api') } 0 .. 39;
$t1->exact_each(\@T, \@subj, $LIMIT, 3, '/closed/index.html',
    "40 subjects on two masters x " . ($LIMIT + 3) . " from both servers over TLS: exactly $LIMIT passed each");
my @wrong = grep { ($c->window_count_on($c->master_of(key('api', $_)), key('api', $_)) // -1) != $LIMIT } @subj;
is(scalar @wrong, 0, "each count is $LIMIT on the master of its slot") or diag("@wrong[0 .. ($#wrong < 9 ? $#wrong : 9)]");
my $hot = $c->key_in($GOOD[1], 'hot', 'api');
is($t1->hammer(\@T, 30, '/closed/index.html', { 'X-Api-Key' => $hot }), "$LIMIT/25/0", "one hot subject, 30 at once from both servers: exactly $LIMIT passed");

# every connection of the workers to a node goes to its TLS port
my %workers = map { $_ => 1 } map { $_->live_workers } @T;
my (%to_tls, @to_plain);
for my $l (`ss -Htnp state established 2>/dev/null`) {
    next unless $l =~ /\s127\.0\.0\.1:(\d+)\s+users:\(\("nginx",pid=(\d+)/ && $workers{$2};
    my $port = $1;
    $to_tls{ $TLS{$port} }++ if $TLS{$port};
    push @to_plain, $port if grep { $_ == $port } @P;
}
is(scalar @to_plain, 0, 'no worker connection to a plain port') or diag("@to_plain");
is(join(' ', sort grep { $to_tls{$_} } @GOOD), join(' ', sort @GOOD), 'workers connected to the TLS ports of both good masters')
    or diag(join ' ', map { "$_=$to_tls{$_}" } sort keys %to_tls);

# --- the master whose certificate does not verify ------------------------------------

my @bad = map { $c->key_in($STRANGER, 'stranger', 'api') } 1 .. 6;
my @br = map { FaultTest::raw_get($T[$_ % 2]->port('PORT'), '/closed/index.html', { 'X-Api-Key' => $bad[$_] }) } 0 .. $#bad;
is(join(' ', map { sr($_) } @br), join(' ', ('503/ERROR') x 6), 'subjects on the master with a stranger certificate: fail policy (503 ERROR)');
my $ST = $c->tls_port($STRANGER);
for my $i (0, 1) {
    ok($T[$i]->wait_log(qr/ratelimit: [^\n]*127\.0\.0\.1:$ST\b[^\n]*(?:certificate|verify)/i, 1, 2),
        'server ' . ($i + 1) . ': error.log names the node and the certificate failure')
        or diag(join "\n", grep { /ratelimit/ && !/slot map/ } split /\n/, $T[$i]->error_log);
}
is(scalar(grep { $c->node($STRANGER, 'EXISTS', key('api', $_)) } @bad), 0, 'nothing counted there');
is($t1->hammer(\@T, 10, '/closed/index.html', { 'X-Api-Key' => $c->key_in($GOOD[0], 'still', 'api') }), "$LIMIT/5/0",
    'meanwhile the other masters: exact');

# --- its replica (a good certificate) takes over: its slots exact again ----------------

my ($sid) = map { $_->{id} } grep { $_->{port} == $STRANGER } $c->nodes;
my ($rep) = map { $_->{port} } grep { $_->{master} eq $sid } $c->nodes;
# A master ignores the failover's request until it knows its replica
# (wait_failover_ready).
ok(defined $c->wait_failover_ready($rep, 10), "the stranger knows its replica, linked to it");
my $t_fo = time;
is($c->node($rep, 'CLUSTER', 'FAILOVER'), 'OK', 'CLUSTER FAILOVER on the replica of the stranger');
my $t_promo = $c->wait_role($rep, 'master', 10);
ok(defined $t_promo, sprintf('replica promoted after %.2fs', ($t_promo // time) - $t_fo))
    or diag(join "\n", map { my $p = $_; "node $p: " . join(' ', grep { /role|link|offset|failover|sync/ }
        split /\r?\n/, ($c->node($p, 'INFO', 'replication') // '')) . "\n"
        . ($c->node($p, 'CLUSTER', 'NODES') // '') } $rep, $STRANGER);
$t_promo //= time;
$c->wait_ok(5);
my ($ex, $last, $s);
while (time < $t_promo + 5) {
    $s = $c->key_in($rep, 'after', 'api');
    my $t0 = time;
    $last = $t1->hammer(\@T, $LIMIT + 5, '/closed/index.html', { 'X-Api-Key' => $s });
    if ($last eq "$LIMIT/5/0") { $ex = $t0; last }
    sleep 0.1;
}
ok(defined $ex && $ex - $t_promo <= 3, sprintf('the slots of the stranger, now on its replica: exact %.2fs after the promotion (<= 3s; last %s)',
    ($ex // time) - $t_promo, $last));
is($c->window_count_on($rep, key('api', $s)), $LIMIT, 'counted on the promoted replica');

$T[$_]->stop_and_check('server ' . ($_ + 1)) for 0, 1;

done_testing;
