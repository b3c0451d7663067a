#!/usr/bin/perl
# Redis Cluster: ratelimit_redis cluster SEEDS, two nginx servers (two
# workers each) on a 6-node cluster (3 masters, 3 replicas, node timeout
# 1 s) started once for the whole file.
#
# Expected (spec): "cluster" with db= or sentinel= fails nginx -t with
# nginx.conf:LINE; each worker loads the slot map ("ratelimit: redis cluster
# slot map from "ADDR": 3 masters") from a seed; keys are PREFIX:ZONE:{SUBJECT}
# (PREFIX:ZONE#{SHA1HEX} past 256 bytes) on the master owning their slot;
# a hammer from both servers admits exactly the limit, on 200 subjects over
# all shards and on one hot subject; a request whose zones' keys are on
# different masters and that one zone rejects is, once its undo has landed
# (100 ms), counted in none; zones of one subject share a slot and are
# decided atomically.  Under load, a `redis-cli --cluster reshard` of 3000
# slots gives the fail policy (ERROR) to at most 2% of the requests and to
# none outside the move, a CLUSTER FAILOVER and a SIGKILL of a master are
# followed without reload, exact again within 3 s of the promotion; no
# request waits longer than timeout + 50 ms; no [alert], no crashed worker.
# With cross_slot: exact too, and zones of one request whose keys are in
# two slots of one master are decided in one call (no undo needed).
# Overrides (issue 41), the servers restarted with `ratelimit_query ...
# override=on`: a PUT through the status API writes the subject's side key
# PREFIX:ZONE+:{TAG}SUBJECT and its zone's marker in that slot,
# PREFIX:ZONE+{N} (N: the smallest number whose CRC16 falls in the slot),
# on the subject's master: CLUSTER KEYSLOT of the count key, the side key
# and the marker agree, the marker is the only one in the cluster, and the
# subject's next requests, on either server, obey the override
# (X-RateLimit-Limit, the number admitted); a subject of another slot,
# whose side key was set with no marker in its slot, keeps the zone's
# limit (its slot's calls read no side key).  With cross_slot the calls
# name no markers and read every side key: the PUT's override applies, a
# side key with no marker in its slot too, and one in a call of two slots
# of one master.
# Bans (issue 43): a zone with ban= bans in the subject's slot (its side key
# and marker there, on its master), refused on the other server; a DELETE
# lifts it on both.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use Digest::SHA qw(sha1_hex);
use FaultTest qw(rhdr sr tally);
use ClusterTest;
use HoldBackend;
use HTTP::Tiny;

RateLimitTest::require_module();

my $WORKERS = 2;
my $LIMIT = 5;
my $TIMEOUT = 0.1;       # timeout=100ms
my $LATE = 0.05;         # the spec's bound: timeout + 50 ms
my $RAMP = 0.25;         # a load's start, timed by nginx (late_ok)
my $t1 = FaultTest->new(workers => $WORKERS);
my $t2 = FaultTest->new(workers => $WORKERS);
my @T = ($t1, $t2);
my $HOLD = $t1->port('HOLD');    # the held-request backend's

my $c = ClusterTest->new($t1, masters => 3, replicas => 1, node_timeout => 1000);
my $t_start = time;
$c->start(20);
my @M0 = $c->masters;
is(scalar @M0, 3, sprintf('cluster of 3 masters + 3 replicas up in %.1fs', time - $t_start));
# Replicas attach after `--cluster create` returns: wait until each master
# lists one.
my %plain_replica_of;
RateLimitTest::wait_until(sub {
    %plain_replica_of = map { $_->{master} => $_->{port} } grep { $_->{role} eq 'slave' } $c->nodes;
    !grep { !$plain_replica_of{ $_->{id} } } @M0;
}, 10);
is(scalar(grep { $plain_replica_of{ $_->{id} } } @M0), 3, 'every master has its replica');
# seeds: one master and one replica; the other masters come from the map
my ($SEED_M) = map { $_->{port} } @M0;
my $SEED_R = $plain_replica_of{ $M0[1]{id} };
my $SEEDS = "127.0.0.1:$SEED_M 127.0.0.1:$SEED_R";

# The servers' fleet secret (fleet_secret_file=), from which the tags of
# the tests' keys are made.
my $FLEET_SECRET = 'one secret for the fleet';
$c->{fleet_secret} = $FLEET_SECRET;
sub key { ClusterTest::subject_key('rl', $_[0], $_[1], $FLEET_SECRET) }
sub side { ClusterTest::side_key('rl', $_[0], $_[1], $FLEET_SECRET) }

# Waits for an undo or a settle to land (one batch and a round trip to
# each master: at most 3 s on a loaded machine), then compares.
sub settled_is {
    my ($got, $want, $name) = @_;
    RateLimitTest::wait_until(sub { $got->() eq $want }, 3);
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is($got->(), $want, $name);
}

# --- 1. configuration -----------------------------------------------------------

my $ZONES = <<'EOF';
log_format timed '$msec $request_time $status $ratelimit_status $http_x_api_key';
ratelimit_zone api  key=$http_x_api_key limit=5 window=60s;
ratelimit_zone a    key=$http_x_api_key limit=3 window=60s;
ratelimit_zone b    key=$http_x_user limit=5 window=60s;
ratelimit_zone c    key=$http_x_api_key limit=4 window=60s;
ratelimit_zone load key=$http_x_api_key limit=1000000 window=60s;
ratelimit_zone ls   key=$http_x_api_key limit=300 window=60s lease=1m;
ratelimit_zone tok  key=$http_x_api_key limit=100 window=60s;
map $http_x_cost $tok_cost { default $http_x_cost; }
ratelimit_zone g    key=$http_x_api_key rate=1r/m algorithm=gcra;
ratelimit_zone bn   key=$http_x_api_key limit=2 window=60s ban=1h;
ratelimit_zone q    key=$http_x_api_key concurrency=2;
ratelimit_zone qw   key=$http_x_api_key concurrency=1 queue=4 queue_timeout=5s;
server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    ratelimit_fail closed;
    access_log %%TMP%%/timed.log timed;
    location /open/   { ratelimit zone=api; ratelimit_fail open; alias %%TMP%%/html/; }
    location /closed/ { ratelimit zone=api; alias %%TMP%%/html/; }
    location /load/   { ratelimit zone=load; alias %%TMP%%/html/; }
    location /ls/     { ratelimit zone=ls; alias %%TMP%%/html/; }
    location /plain/  { alias %%TMP%%/html/; }
    location /q/      { ratelimit zone=q; alias %%TMP%%/html/; }
    location /qw/     { ratelimit zone=qw; proxy_pass http://127.0.0.1:%%HOLD%%; }
    location /two/    { ratelimit zone=a; ratelimit zone=b; alias %%TMP%%/html/; }
    location /rev/    { ratelimit zone=b; ratelimit zone=a; alias %%TMP%%/html/; }
    location /same/   { ratelimit zone=a; ratelimit zone=c; alias %%TMP%%/html/; }
    location /g/      { ratelimit zone=g burst=2 nodelay; ratelimit zone=b; alias %%TMP%%/html/; }
    location /bn/     { ratelimit zone=bn; alias %%TMP%%/html/; }
    # The test's clients name their cost, through a map: cost=$http_x_cost
    # would warn (a cost each client chooses), and nginx -t must not here.
    location /tok/    { ratelimit zone=tok cost=$tok_cost; ratelimit zone=b; ratelimit_settle zone=tok $http_x_used; alias %%TMP%%/html/; }
}
EOF

# With $override, a status location whose PUT sets overrides: every rate
# zone reads its subjects' side keys (issue 41).  With $forgive, one whose
# DELETE forgives in zone bn, lifting bans (issue 43).
sub conf {
    my ($t, $redis_line, $override, $forgive) = @_;
    (my $zones = $ZONES) =~ s/%%HOLD%%/$HOLD/g;
    $zones =~ s/\n}\n\z/\n    location = \/q { ratelimit_query zone=api zone=a override=on; }\n}\n/ or die
        if $override;
    $zones =~ s/\n}\n\z/\n    location = \/bq { ratelimit_query zone=bn delete=on; }\n}\n/ or die
        if $forgive;
    $t->write_conf("$redis_line\n$zones");
}

my $tmp = $t2->tmp;
my $pwfile = "$tmp/cluster.pw";
{ open my $fh, '>', $pwfile or die; print {$fh} "secret\n"; close $fh; chmod 0600, $pwfile }
my $fleetfile = "$tmp/tag.secret";
{ open my $fh, '>', $fleetfile or die; print {$fh} "$FLEET_SECRET\n"; close $fh; chmod 0600, $fleetfile }
for my $ok (["seeds, user, password, timeouts", "ratelimit_redis cluster $SEEDS user=u password=p timeout=100ms connect_timeout=200ms fleet_secret_file=$fleetfile;"],
            ['one seed, password_file', "ratelimit_redis cluster 127.0.0.1:$SEED_M password_file=$pwfile fleet_secret_file=$fleetfile;"]) {
    conf($t2, $ok->[1]);
    my ($st, $out) = $t2->nginx_t;
    is($st, 0, "valid: $ok->[0]") or diag($out);
    unlike($out, qr/\[warn\]/, "valid: $ok->[0]: no warning") or diag($out);
}
{
    conf($t2, "ratelimit_redis cluster $SEEDS;");
    my ($st, $out) = $t2->nginx_t;
    my $line = $t2->conf_line(qr/^ratelimit_redis cluster/);
    is($st, 0, 'valid: cluster without fleet_secret_file=');
    like($out, qr/\[warn\] "cluster" without "fleet_secret_file=": clients that choose their keys can put them all in one hash slot; give every server the same secret file in \Q$tmp\E\/nginx\.conf:$line\b/,
        '... with a warning that says what to do, at nginx.conf:' . $line) or diag($out);
}
for my $bad (['db=', "ratelimit_redis cluster $SEEDS db=1 timeout=100ms;", qr/db/],
             ['sentinel=', "ratelimit_redis cluster $SEEDS sentinel=mymaster;", qr/sentinel/],
             ['no seed', "ratelimit_redis cluster timeout=100ms;", qr/address|seed/]) {
    conf($t2, $bad->[1]);
    my ($st, $out) = $t2->nginx_t;
    my $line = $t2->conf_line(qr/^ratelimit_redis cluster/);
    my $what = $bad->[2];
    isnt($st, 0, "invalid: cluster with $bad->[0]: nginx -t fails");
    like($out, qr/\[emerg\][^\n]*(?:$what)[^\n]* in \Q$tmp\E\/nginx\.conf:$line\b/,
        "invalid: cluster with $bad->[0]: [emerg] naming the problem at nginx.conf:$line") or diag($out);
}

# --- start: the slot map from a seed --------------------------------------------

for my $t (@T) {
    conf($t, "ratelimit_redis cluster $SEEDS timeout=100ms connect_timeout=200ms fleet_secret_file=$fleetfile;");
    $t->start_nginx;
}
for my $i (0, 1) {
    my ($when, $r) = $T[$i]->wait_passed('open', 'up', 5);
    ok(defined $when, 'server ' . ($i + 1) . ': PASSED through the cluster') or diag(sr($r));
}
my %W0 = map { my $t = $_; ($t => join ' ', $t->live_workers) } @T;
my $MAP = qr/\[info\] (\d+)#\d+: ratelimit: redis cluster slot map from "127\.0\.0\.1:(\d+)": (\d+) masters/;

# worker pid => [ [seed port, masters] ... ] of its slot map lines
sub maps {
    my ($t) = @_;
    my %m;
    my $log = $t->error_log;
    push @{ $m{$1} }, [$2, $3] while $log =~ /$MAP/g;
    return \%m;
}
for my $i (0, 1) {
    my $t = $T[$i];
    $t->burst(8, sub { ('/open/index.html', { 'X-Api-Key' => "warm$_[0]" }) }, 3);    # reach both workers
    my $m = maps($t);
    my @w = $t->live_workers;
    my @ok = grep { my $l = $m->{$_}; $l && $l->[0][1] == 3 && $l->[0][0] =~ /^(?:$SEED_M|$SEED_R)$/ } @w;
    is(scalar @ok, $WORKERS, 'server ' . ($i + 1) . ': every worker loaded the slot map from a seed: 3 masters')
        or diag(join "\n", grep { /ratelimit/ } split /\n/, $t->error_log);
}

# --- 2. exactness ----------------------------------------------------------------

my $N_SUBJ = 200;
my $EXTRA = 3;
my @SUBJ = map { "s$_" } 0 .. $N_SUBJ - 1;
$t1->exact_each(\@T, \@SUBJ, $LIMIT, $EXTRA, '/closed/index.html',
    "$N_SUBJ subjects x " . ($LIMIT + $EXTRA) . " requests from both servers: exactly $LIMIT passed each");
my (%on, @wrong);
for my $s (@SUBJ) {
    my $k = key('api', $s);
    my $m = $c->master_of($k);
    $on{$m}++;
    my $h = RateLimitTest::read_window(sub { $c->node($m, @_) }, $k);
    my %h = ref $h eq 'HASH' ? %$h : ();
    push @wrong, "$k on $m: " . (ref $h eq 'HASH' ? "t=" . ($h{t} // '-') : "$h") unless ($h{t} // -1) == $LIMIT;
}
is(scalar @wrong, 0, "every subject's key rl:api:{TAG}SUBJECT holds t=$LIMIT on the master of its slot")
    or diag(join "\n", @wrong[0 .. ($#wrong < 9 ? $#wrong : 9)]);
my @spread = map { $on{ $_->{port} } // 0 } @M0;
ok(!(grep { $_ < 40 } @spread), "the subjects spread over all 3 masters (@spread)");
is($c->cmd('rl:api:s0', 'EXISTS', 'rl:api:s0'), 0, 'no key without the hash tag (rl:api:s0)');

# Subjects a client crafted to share the hash tag "pin" (what lay between
# '{' and '}' when the tag was the subject itself): their keys, as SCAN
# finds them on each master, spread over the masters.
{
    my @pinned = map { "pin}$_" } 0 .. 59;
    $t1->req('closed', $_) for @pinned;
    my @found = map {
        my ($port, $cursor, $n) = ($_->{port}, 0, 0);
        do {
            my $r = $c->node($port, 'SCAN', $cursor, 'MATCH', 'rl:api:*pin}*', 'COUNT', 1000);
            $cursor = $r->[0];
            $n += @{ $r->[1] };
        } while ($cursor ne '0');
        $n;
    } @M0;
    my $total = 0;
    $total += $_ for @found;
    is($total, 60, '60 subjects "pin}N": 60 keys');
    ok(!(grep { $_ < 8 } @found), "... spread over the 3 masters (@found), not pinned to one");
}

is($t1->hammer(\@T, 30, '/closed/index.html', { 'X-Api-Key' => 'hot' }), "$LIMIT/25/0",
    "one hot subject, 30 at once from both servers: exactly $LIMIT passed");
is($c->window_total(key('api', 'hot')), $LIMIT, "hot subject: count $LIMIT in Redis");

# Quota leases in a cluster: a lease's grants and give-backs go to the
# master of its subject's key.  Hammered from both servers, never above the
# limit; once quiet (the leases' units back), the rest of the limit but for
# the bound (docs/operations.md: q = floor(300 / (8 x 2)) = 18 per server,
# and a lease whose renewal timed out under `timeout=100ms` is lost until
# its bucket leaves the window: 2 q + q); Redis's count between what was
# admitted and the limit (a worker that remembers a rejection rejects
# until the reset, though units came back from leases meanwhile: also
# within the bound).
{
    my ($p1) = split m{/}, $t1->hammer(\@T, 400, '/ls/index.html', { 'X-Api-Key' => 'leased' });
    cmp_ok($p1, '<=', 300, "leased zone, 400 at once from both servers: $p1 passed, never above 300");
    sleep 1.6;
    my ($p2) = split m{/}, $t1->hammer(\@T, 100, '/ls/index.html', { 'X-Api-Key' => 'leased' });
    my $total = $p1 + $p2;
    ok($total <= 300 && $total >= 300 - 3 * 18,
        "leased zone: once the leases came back, $total in all ($p1 + $p2): 300 but for the bound");
    my $count = $c->window_total(key('ls', 'leased'));
    ok($count >= $total && $count <= 300, "leased zone: count $count on its master, between the $total admitted and 300");
    diag("leased zone in a cluster: $total admitted of 300") if $total < 300;
}

my $long = 'L' x 300;
my @lr = map { $t1->req('closed', $long) } 1 .. $LIMIT + 2;
is(tally(@lr), "$LIMIT/2/0", 'a 300-byte subject: exact limit');
my $lk = key('api', $long);
is($c->window_count_on($c->master_of($lk), $lk), $LIMIT, "a 300-byte subject: $lk holds t=$LIMIT on its master");

# A concurrency zone's slot moved to another master behind nginx's back:
# its call answered MOVED, which it follows (it did not run there), instead
# of giving the request the fail policy (closed here: 503).
{
    my ($s, $slot, $from);
    for my $n (0 .. 500) {
        $s = "mv$n";
        # {PREFIX:ZONE:{TAG}SUBJECT}:held and :queue, a slot of their own
        $slot = ClusterTest::keyslot('{' . key('q', $s) . '}:held');
        $from = $c->master_of($slot);
        last if $c->node($from, 'CLUSTER', 'COUNTKEYSINSLOT', $slot) == 0;
    }
    my $before = $t1->req('q', $s);
    is(sr($before), '200/PASSED', "concurrency zone, subject $s (slot $slot on $from): PASSED");
    # Its slot goes back once its response has left: the release may reach
    # Redis after the client has the response.  A master refuses to give
    # up a hash slot it still holds keys of, so the move waits for it.
    my $keys_in = sub { $c->node($_[0], 'CLUSTER', 'COUNTKEYSINSLOT', $slot) };
    ok(defined RateLimitTest::wait_until(sub { $keys_in->($from) == 0 }, 2),
       "the slot given back on $from");
    my ($to) = grep { $_ != $from } map { $_->{port} } @M0;
    my ($from_id, $to_id) = map { $c->node_id($_) } $from, $to;
    # as redis-cli --cluster moves a slot: the new owner takes a new epoch
    my @moved = ($c->node($to, 'CLUSTER', 'SETSLOT', $slot, 'IMPORTING', $from_id),
                 $c->node($from, 'CLUSTER', 'SETSLOT', $slot, 'MIGRATING', $to_id),
                 map { $c->node($_, 'CLUSTER', 'SETSLOT', $slot, 'NODE', $to_id) } $to, $from);
    is("@moved", 'OK OK OK OK', "slot $slot moved to $to");
    ok(defined $c->wait_ok(10), 'every node agrees on the move');
    $c->refresh;
    my @after = map { $_->req('q', $s) } @T;
    is(join(' ', map { sr($_) } @after), '200/PASSED 200/PASSED',
       'after the move, both servers follow MOVED to the new master');
    ok(defined RateLimitTest::wait_until(sub { $keys_in->($to) == 0 }, 2),
       'the slots were given back there');
}

# A freed slot wakes its waiter through Pub/Sub in a cluster too: the
# waiter, queued on the other server, is served as the holder leaves, not
# at its once-a-second re-check.
{
    HoldBackend::start($t1, $HOLD);
    my @r = $t1->burst(2, sub {
        $_[0] == 0 ? ('/qw/x?key=w&hold=400', { 'X-Api-Key' => 'waker' }, $t1->port)
                   : ('/qw/x?key=w&hold=10', { 'X-Api-Key' => 'waker' }, $t2->port);
    }, 5, 0.1);
    is(join(' ', map { sr($_) } @r), '200/PASSED 200/PASSED', 'concurrency 1: holder and waiter both served');
    cmp_ok($r[1]{elapsed}, '<', 0.6,
        sprintf('the waiter, sent 0.1 s after a 0.4 s holder, was served in %.3f s', $r[1]{elapsed}));
}

# --- 5. multi-zone requests --------------------------------------------------------

{
    my ($m1, $m2) = map { $_->{port} } @M0[0, 1];
    # subjects whose keys in zones a and b are on different masters
    my $K = $c->key_in($m1, 'mzK', 'a');
    my $U = $c->key_in($m2, 'mzU', 'b');
    my @r = map { FaultTest::raw_get($T[$_ % 2]->port('PORT'), '/two/index.html', { 'X-Api-Key' => $K, 'X-User' => $U }) } 1 .. 6;
    is(join(' ', map { $_->{status} } @r), '200 200 200 429 429 429', 'zones a (limit 3) and b (5) on two masters: 3 admitted, then rejected by a');
    settled_is(sub { $c->window_total(key('a', $K)) . '/' . $c->window_total(key('b', $U)) }, '3/3',
        'rejected by a: counted in neither (a=3, b=3 once the undo landed)');

    # b rejects, a admitted each time on a fresh subject: undone there
    my $U2 = $c->key_in($m2, 'mzU', 'b');
    my @K2 = map { $c->key_in($m1, 'mzK2', 'a') } 1 .. 7;
    @r = map { FaultTest::raw_get($T[$_ % 2]->port('PORT'), '/rev/index.html', { 'X-Api-Key' => $K2[$_], 'X-User' => $U2 }) } 0 .. 6;
    is(join(' ', map { $_->{status} } @r), '200 200 200 200 200 429 429', 'zones b then a: 5 admitted, then rejected by b');
    settled_is(sub { join(' ', map { $c->window_total(key('a', $_)) } @K2) }, '1 1 1 1 1 0 0',
        'rejected by b: not counted in a (the fresh subjects of the rejected requests hold 0)');
    is($c->window_total(key('b', $U2)), 5, 'b holds 5');

    # at once from both servers
    for my $loc ('two', 'rev') {
        my $K3 = $c->key_in($m1, "mz3$loc", 'a');
        my $U3 = $c->key_in($m2, "mz3$loc", 'b');
        # the two parts are decided apart: until an undo lands, a zone holds a
        # request the other rejected and may reject another meanwhile, so
        # fewer than 3 may pass (documented), never more; even none, when
        # the masters take the requests in orders such that the 3 a admits
        # and the 5 b admits are different requests
        my $got = $t1->hammer(\@T, 20, "/$loc/index.html", { 'X-Api-Key' => $K3, 'X-User' => $U3 });
        my ($p, $r, $o) = split m{/}, $got;
        ok($p <= 3 && $o == 0, "/$loc/: 20 at once from both servers: at most 3 passed ($got)");
        settled_is(sub { $c->window_total(key('a', $K3)) . '/' . $c->window_total(key('b', $U3)) }, "$p/$p",
            "/$loc/: once the undos landed a and b hold exactly the $p passed: the rejected are counted in neither");
    }

    # One part counted the request, the other got no answer in time (its
    # master stopped): failed closed, the request is refused, and the part
    # that counted it undoes that.  (The stopped master may still run its
    # part when it resumes: an outcome unknown, never undone nor resent.)
    my $Ks = $c->key_in($m1, 'stallK', 'a');
    my $Us = $c->key_in($m2, 'stallU', 'b');
    kill 'STOP', $c->pid($m2);
    my $stalled = FaultTest::raw_get($T[0]->port('PORT'), '/two/index.html', { 'X-Api-Key' => $Ks, 'X-User' => $Us });
    kill 'CONT', $c->pid($m2);
    is(FaultTest::sr($stalled), '503/ERROR', "zone b's master stopped: failed closed, 503");
    settled_is(sub { $c->window_total(key('a', $Ks)) }, 0,
        'refused for the part that failed: not counted in a, the part that admitted it');

    # one subject in zones a and c: one slot, one master, decided atomically
    my $K4 = 'same-subject';
    is(ClusterTest::keyslot(key('a', $K4)), ClusterTest::keyslot(key('c', $K4)), 'zones a and c of one subject: one slot');
    is($c->node($c->master_of(key('a', $K4)), 'CLUSTER', 'KEYSLOT', key('c', $K4)), ClusterTest::keyslot(key('a', $K4)),
        '... as CLUSTER KEYSLOT says');
    is($t1->hammer(\@T, 12, '/same/index.html', { 'X-Api-Key' => $K4 }), '3/9/0', 'zones a (3) and c (4), one subject, 12 at once: 3 passed');
    is($c->window_total(key('a', $K4)) . '/' . $c->window_total(key('c', $K4)), '3/3',
        'same slot: a=3 and c=3 at once (no undo needed)');
}

# Costs and settles in a cluster: zone tok (100 units) of one subject on one
# master, b (5 requests) of another on a second.  Each settle lands on its
# reservation's key (its master); a request that b rejects gives back what
# tok reserved for it.
{
    my ($m1, $m2) = map { $_->{port} } @M0[0, 1];
    my $K = $c->key_in($m1, 'tokK', 'tok');
    my $U = $c->key_in($m2, 'tokU', 'b');
    my @sent = ([30, 12], [40, 55], [20, 0], [25, 25], [5, 5], [1, 1]);  # cost, used
    my (@r, $used);
    for my $i (0 .. $#sent) {
        push @r, FaultTest::raw_get($T[$i % 2]->port('PORT'), '/tok/index.html',
            { 'X-Api-Key' => $K, 'X-User' => $U, 'X-Cost' => $sent[$i][0], 'X-Used' => $sent[$i][1] });
        # its settle lands before the next request is sent
        $used += $sent[$i][1] if $i < 5;
        RateLimitTest::wait_until(sub { $c->window_total(key('tok', $K)) == $used }, 3);
    }
    is(join(' ', map { $_->{status} } @r), '200 200 200 200 200 429', 'tok and b on two masters: 5 admitted, the 6th rejected by b');
    settled_is(sub { $c->window_total(key('tok', $K)) . '/' . $c->window_total(key('b', $U)) }, '97/5',
        'tok holds what the 5 used (12+55+0+25+5), the 6th given back; b holds 5');
}

# A GCRA zone in a cluster: its key (a string, the TAT) on its subject's
# master, shared by both servers; with a window zone on another master, a
# request the window zone rejects moves no TAT.
{
    my ($m1, $m2) = map { $_->{port} } @M0[0, 1];
    my $K = $c->key_in($m1, 'gK', 'g');
    my $U = $c->key_in($m2, 'gU', 'b');
    my @r = map { FaultTest::raw_get($T[$_ % 2]->port('PORT'), '/g/index.html', { 'X-Api-Key' => $K, 'X-User' => $U }) } 1 .. 5;
    is(join(' ', map { $_->{status} } @r), '200 200 200 429 429', 'GCRA 1r/m burst=2 nodelay from both servers: 3 at once, then rejected');
    is($c->node($c->master_of(key('g', $K)), 'TYPE', key('g', $K)), 'string', "the subject's TAT is a string on its master");
    my $U2 = $c->key_in($m2, 'gU2', 'b');
    my $K2 = $c->key_in($m1, 'gK2', 'g');
    FaultTest::raw_get($T[0]->port('PORT'), '/g/index.html', { 'X-Api-Key' => "fill$_", 'X-User' => $U2 }) for 1 .. 5;
    my $before = $c->node($c->master_of(key('g', $K2)), 'EXISTS', key('g', $K2));
    my $rej = FaultTest::raw_get($T[1]->port('PORT'), '/g/index.html', { 'X-Api-Key' => $K2, 'X-User' => $U2 });
    settled_is(sub { $rej->{status} . '/' . $before . '/' . $c->node($c->master_of(key('g', $K2)), 'EXISTS', key('g', $K2)) }, '429/0/0',
        'rejected by b on another master: the GCRA zone keeps no TAT for it');
}

# --- load helpers ---------------------------------------------------------------------

# 2 clients per server: fresh subjects and a pool of 300 that come back;
# client 0 of each server also asks for /plain/ (no ratelimit) every tenth
# request, for the diagnostics: the machine's own delays
sub start_loads {
    my ($tag) = @_;
    return [ map {
        my $s = $_;
        $T[$s]->start_load(clients => 2, max_seconds => 40, max_requests => 50000, pause => 0.003,
            pick => sub {
                my ($cl, $i) = @_;
                return ('plain', 'x') if $cl == 0 && $i % 10 == 0;
                ('load', $i % 2 ? "$tag-$s$cl-$i" : 'pool' . int(rand 300))
            })
    } 0, 1 ];
}

# the load's records: (limited, plain)
sub finish_loads {
    my ($loads) = @_;
    my @rec;
    for my $i (0, 1) { push @rec, $T[$i]->finish_load($loads->[$i]) }    # it uses $_
    return ([ grep { $_->{loc} eq 'load' } @rec ], [ grep { $_->{loc} eq 'plain' } @rec ]);
}

# nginx's own view: [end time, $request_time, status, $ratelimit_status] of
# the requests that ended between $from and $to
sub timed {
    my ($from, $to) = @_;
    my @e;
    for my $t (@T) {
        for (split /\n/, RateLimitTest::_read_file($t->tmp . '/timed.log')) {
            my @f = split / /;
            push @e, \@f if $f[0] >= $from && $f[0] <= $to;
        }
    }
    return @e;
}

# $t_ref: the event the diagnostics give times relative to
sub late_ok {
    my ($name, $t_ref, $rec, $plain) = @_;
    my @rec = @$rec;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my @pl = sort { $b->{el} <=> $a->{el} } @$plain;
    note(sprintf '%s: slowest /plain/ (no ratelimit, same servers): %s', $name,
        join(', ', map { sprintf '%.0fms at %+.2fs', 1000 * $_->{el}, $_->{t0} - $t_ref } @pl[0 .. ($#pl < 2 ? $#pl : 2)]));
    my ($slow) = sort { $b->[1] <=> $a->[1] } timed($rec[0]{t0} // 0, time);
    note(sprintf '%s: slowest in nginx ($request_time): %.0f ms, %s/%s at %+.2fs', $name,
        1000 * $slow->[1], $slow->[2], $slow->[3], $slow->[0] - $t_ref) if $slow;
    my @errs = grep { $_->{err} ne '-' || !$_->{status} } @rec;
    is(scalar @errs, 0, "$name: every load request answered");
    # The load's first $RAMP s: its clients were just forked, and on 2
    # cores their first requests can wait to be scheduled longer than the
    # bound, before nginx sees them (nginx's $request_time stays short).
    # Their time is taken from nginx's log; the rest from the clients.
    my ($start) = sort { $a <=> $b } map { $_->{t0} } @rec;
    $start //= time;
    my @late = sort { $b->{el} <=> $a->{el} }
        grep { $_->{t0} >= $start + $RAMP && $_->{el} > $TIMEOUT + $LATE } @rec;
    is(scalar @late, 0, sprintf('%s: no request answered later than timeout + 50 ms (of %d)', $name, scalar @rec))
        or diag(scalar(@late) . " late, slowest: " . join(', ', map { sprintf '%s/%s %.0fms at %+.2fs', $_->{status}, $_->{rs}, 1000 * $_->{el}, $_->{t0} - $t_ref } @late[0 .. ($#late < 9 ? $#late : 9)]));
    my @ramp = grep { $_->[1] > $TIMEOUT + $LATE }
        timed($start, $start + $RAMP + $TIMEOUT + $LATE);
    is(scalar @ramp, 0, "$name: nor in nginx's view in the load's first ${RAMP}s")
        or diag(join ', ', map { sprintf '%.0fms', 1000 * $_->[1] } @ramp);
}

my $EXACT = "$LIMIT/5/0";
# Hammers fresh subjects on master $port until one is exact: (time, last tally, tries)
sub wait_exact {
    my ($port, $tag, $secs) = @_;
    my $deadline = time + $secs;
    my ($i, $last, $s) = (0, '');
    while (time < $deadline) {
        my $t0 = time;
        $s = $c->key_in($port, $tag, 'api');
        $last = $t1->hammer(\@T, $LIMIT + 5, '/closed/index.html', { 'X-Api-Key' => $s });
        $i++;
        return ($t0, $last, $i, $s) if $last eq $EXACT;
        sleep 0.1;
    }
    return (undef, $last, $i, $s);
}

sub map_lines { my $n = 0; $n += $_->count_log($MAP) for @T; $n }

# --- 3. resharding under load ----------------------------------------------------------

{
    my ($from, $to) = map { $_->{port} } @M0[2, 0];
    my %before = map { $_ => 1 } map { $_->[0] .. $_->[1] } @{ (grep { $_->{port} == $from } $c->masters)[0]{slots} };
    my $maps0 = map_lines();
    my $loads = start_loads('rs');
    sleep 1;
    my ($t_a, $t_b) = $c->reshard($from, $to, 3000);
    ok(defined $c->wait_ok(5), sprintf('reshard of 3000 slots done in %.2fs, cluster ok', $t_b - $t_a));
    sleep 1;
    my ($rec, $plain) = finish_loads($loads);
    my @rec = @$rec;
    my @during = grep { $_->{t1} >= $t_a && $_->{t0} <= $t_b } @rec;
    my @err = grep { $_->{rs} eq 'ERROR' } @rec;
    my @err_out = grep { $_->{t1} < $t_a || $_->{t0} > $t_b } @err;
    note(sprintf 'reshard: %d requests, %d during the move, %d ERROR', scalar @rec, scalar @during, scalar @err);
    cmp_ok(scalar @during, '>=', 100, 'reshard: load ran during the move (' . scalar(@during) . ' requests)');
    cmp_ok(scalar @err, '<=', 0.02 * @rec, sprintf('reshard: fail policy (ERROR) for at most 2%% of the requests (%d of %d)', scalar @err, scalar @rec));
    is(scalar @err_out, 0, 'reshard: no ERROR outside the move')
        or diag(join ', ', map { sprintf '%+.2fs', $_->{t0} - $t_b } @err_out[0 .. ($#err_out < 9 ? $#err_out : 9)]);
    my %rs; $rs{"$_->{status}/$_->{rs}"}++ for @rec;
    is(join(' ', sort keys %rs), join(' ', sort grep { $rs{$_} } ('200/PASSED', '503/ERROR')),
        'reshard: load requests PASSED or ERROR only') or diag(join ', ', map { "$_=$rs{$_}" } sort keys %rs);
    late_ok('reshard', $t_a, $rec, $plain);
    cmp_ok(map_lines(), '>', $maps0, 'reshard: the workers loaded the slot map again');

    # fresh subjects in moved slots
    $c->refresh;
    my $s;
    do { $s = $c->key_in($to, 'moved', 'api') } until $before{ ClusterTest::keyslot(key('api', $s)) };
    is($t1->hammer(\@T, $LIMIT + 5, '/closed/index.html', { 'X-Api-Key' => $s }), $EXACT,
        "after the reshard, a subject of a moved slot: exact limit from both servers");
    is($c->window_count_on($to, key('api', $s)), $LIMIT, '... counted on the master it moved to');
}

# --- 4. failover and SIGKILL under load ---------------------------------------------------

{
    $c->refresh;
    my ($m) = $c->masters;
    my $r = $plain_replica_of{ $m->{id} };
    my $loads = start_loads('fo');
    sleep 0.5;
    $c->wait_failover_ready($r, 10);
    my $t_fo = time;
    is($c->node($r, 'CLUSTER', 'FAILOVER'), 'OK', "CLUSTER FAILOVER on the replica $r of $m->{port}");
    my $t_promo = $c->wait_role($r, 'master', 10);
    ok(defined $t_promo, sprintf('CLUSTER FAILOVER: %d promoted after %.2fs', $r, ($t_promo // time) - $t_fo));
    $t_promo //= time;
    $c->wait_ok(5);
    my ($ex, $last, $n, $s) = wait_exact($r, 'fo', 5);
    ok(defined $ex && $ex - $t_promo <= 3, sprintf('CLUSTER FAILOVER: exact limit on the promoted master %.2fs after the promotion (<= 3s; %d tries, last %s)',
        ($ex // time) - $t_promo, $n, $last));
    is($c->window_count_on($r, key('api', $s)), $LIMIT, 'CLUSTER FAILOVER: counted on the promoted master');

    # SIGKILL of another master
    my ($k) = grep { $_->{port} != $r } $c->masters;
    my $kr = $plain_replica_of{ $k->{id} };
    my $t_kill = time;
    $c->kill_node($k->{port}, 'KILL');
    my $t_promo2 = $c->wait_role($kr, 'master', 10);
    ok(defined $t_promo2, sprintf('SIGKILL of master %d: %d promoted after %.2fs', $k->{port}, $kr, ($t_promo2 // time) - $t_kill));
    $t_promo2 //= time;
    ok(defined $c->wait_ok(5), 'SIGKILL: cluster ok again');
    my ($ex2, $last2, $n2, $s2) = wait_exact($kr, 'kill', 5);
    ok(defined $ex2 && $ex2 - $t_promo2 <= 3, sprintf('SIGKILL: exact limit on the promoted master %.2fs after the promotion (<= 3s; %d tries, last %s)',
        ($ex2 // time) - $t_promo2, $n2, $last2));
    is($c->window_count_on($kr, key('api', $s2)), $LIMIT, 'SIGKILL: counted on the promoted master');
    sleep 0.3;
    my ($rec, $plain) = finish_loads($loads);
    my @rec = @$rec;
    my %rs; $rs{"$_->{status}/$_->{rs}"}++ for @rec;
    note('failovers: load outcomes ' . join(', ', map { "$_=$rs{$_}" } sort keys %rs));
    note(sprintf 'failovers: ERROR from CLUSTER FAILOVER to the SIGKILL %d, after the SIGKILL %d',
        scalar(grep { $_->{rs} eq 'ERROR' && $_->{t1} >= $t_fo && $_->{t0} < $t_kill } @rec),
        scalar(grep { $_->{rs} eq 'ERROR' && $_->{t1} >= $t_kill } @rec));
    my @err_late = grep { $_->{rs} eq 'ERROR' && $_->{t0} > $t_promo2 + 3 } @rec;
    is(scalar @err_late, 0, 'failovers: no ERROR later than 3 s after the last promotion');
    late_ok('failovers', $t_fo, $rec, $plain);

    for my $i (0, 1) {
        is(join(' ', $T[$i]->live_workers), $W0{ $T[$i] }, 'server ' . ($i + 1) . ': the same workers throughout (no respawn, no reload)');
    }
}

# --- 6. overrides (issue 41) ---------------------------------------------------------------

# Both servers restarted with `ratelimit_redis $line`, overrides on.
sub restart_overrides {
    my ($name, $line) = @_;
    for my $t (@T) {
        $t->stop_nginx;
        conf($t, $line, 1);
        $t->start_nginx;
    }
    ok(defined(($T[$_]->wait_passed('open', "$name-up", 5))[0]), "$name: server " . ($_ + 1) . ' PASSED') for 0, 1;
    $c->refresh;
}

sub put_override {
    my ($t, $query) = @_;
    return HTTP::Tiny->new(timeout => 5)->request('PUT', $t->url("/q?$query"));
}

# The keys of node $port matching $pattern, by SCAN.
sub scan_keys {
    my ($port, $pattern) = @_;
    my ($cursor, @keys) = (0);
    do {
        my $r = $c->node($port, 'SCAN', $cursor, 'MATCH', $pattern, 'COUNT', 1000);
        $cursor = $r->[0];
        push @keys, @{ $r->[1] };
    } while ($cursor ne '0');
    return @keys;
}

# $n requests of $subject at $loc, to the servers in turn (server 2 first).
sub alternating {
    my ($loc, $subject, $n, $user) = @_;
    return map { FaultTest::raw_get($T[$_ % 2]->port('PORT'), "/$loc/index.html",
        { 'X-Api-Key' => $subject, $user ? ('X-User' => $user) : () }) } 1 .. $n;
}

{
    restart_overrides('overrides', "ratelimit_redis cluster $SEEDS timeout=100ms connect_timeout=200ms fleet_secret_file=$fleetfile;");
    my @m = map { $_->{port} } $c->masters;
    my $S = $c->key_in($m[0], 'ovS', 'api');
    my $slot = ClusterTest::keyslot(key('api', $S));
    my $marker = ClusterTest::marker_key('rl', 'api', $slot);
    my $put = put_override($t1, "zone=api&key=$S&limit=8");
    is($put->{status}, 204, "overrides: PUT ?zone=api&key=$S&limit=8 through server 1: 204") or diag($put->{content});
    my @r = alternating('closed', $S, 10);
    is(rhdr($r[0], 'X-RateLimit-Limit'), 8, "overrides: the subject's next request, on server 2: X-RateLimit-Limit 8");
    is(FaultTest::statuses(@r), join(' ', ('200') x 8, '429', '429'), 'overrides: 8 admitted from both servers, not 5');
    is(join(' ', map { $c->node($m[0], 'CLUSTER', 'KEYSLOT', $_) } key('api', $S), side('api', $S), $marker),
        "$slot $slot $slot", "overrides: CLUSTER KEYSLOT of the count key, the side key and $marker: one slot ($slot)");
    my @markers = map { my $p = $_; map { "$_ on $p" } scan_keys($p, 'rl:*+{*') } @m;
    is("@markers", "$marker on $m[0]", "overrides: the marker of the subject's slot, on its master, the only one in the cluster");
    is($c->node($m[0], 'GET', side('api', $S)), 'o=8,60000,0', 'overrides: the side key holds the override, on that master');
    is($c->node($m[0], 'ZSCORE', $marker, side('api', $S)), 'inf', 'overrides: the marker lists it');

    # another slot of the same master: a side key set there with no PUT
    my $S2;
    do { $S2 = $c->key_in($m[0], 'ovS2', 'api') } until ClusterTest::keyslot(key('api', $S2)) != $slot;
    my $slot2 = ClusterTest::keyslot(key('api', $S2));
    is($c->node($m[0], 'SET', side('api', $S2), 'o=8,60000,0'), 'OK', "overrides: a side key of $S2 (slot $slot2, the same master) set by hand");
    is($c->node($m[0], 'EXISTS', ClusterTest::marker_key('rl', 'api', $slot2)), 0, "overrides: no marker in slot $slot2");
    my @r2 = alternating('closed', $S2, 7);
    is(FaultTest::statuses(@r2) . ' / ' . (rhdr($r2[0], 'X-RateLimit-Limit') // '-'), '200 200 200 200 200 429 429 / 5',
        "overrides: its slot's calls read no side key: the zone's limit (5)");
}

# --- cross_slot: a master's requests of a loop turn in one call ---------------------------

{
    for my $t (@T) {
        $t->stop_nginx;
        conf($t, "ratelimit_redis cluster $SEEDS cross_slot timeout=100ms connect_timeout=200ms fleet_secret_file=$fleetfile;");
        $t->start_nginx;
    }
    ok(defined(($T[$_]->wait_passed('open', 'xs-up', 5))[0]), 'cross_slot: server ' . ($_ + 1) . ' PASSED') for 0, 1;
    $c->refresh;
    my @m = map { $_->{port} } $c->masters;
    my @subj = map { $c->key_in($m[$_ % 3], 'xs', 'api') } 0 .. 29;
    $t1->exact_each(\@T, \@subj, $LIMIT, 3, '/closed/index.html',
        "cross_slot: 30 subjects over 3 masters x " . ($LIMIT + 3) . " from both servers: exactly $LIMIT passed each");
    my @wrong = grep { $c->window_total(key('api', $_)) != $LIMIT } @subj;
    is(scalar @wrong, 0, "cross_slot: each count $LIMIT in Redis") or diag("@wrong");

    # zones a and b with subjects in two slots of one master: one call, atomic
    my $K = $c->key_in($m[0], 'xsK', 'a');
    my $U = $c->key_in($m[0], 'xsU', 'b');
    isnt(ClusterTest::keyslot(key('a', $K)), ClusterTest::keyslot(key('b', $U)), 'cross_slot: the two keys are in two slots of one master');
    is($t1->hammer(\@T, 20, '/two/index.html', { 'X-Api-Key' => $K, 'X-User' => $U }), '3/17/0',
        'cross_slot: zones a (3) and b (5) on one master, 20 at once: exactly 3 passed');
    is($c->window_total(key('a', $K)) . '/' . $c->window_total(key('b', $U)), '3/3', 'cross_slot: a=3 and b=3 at once (one call, no undo)');

    # on two masters: decided apart, undone as without cross_slot
    my $K2 = $c->key_in($m[1], 'xsK', 'a');
    my $U2 = $c->key_in($m[2], 'xsU', 'b');
    my @st = map { FaultTest::raw_get($T[$_ % 2]->port('PORT'), '/two/index.html', { 'X-Api-Key' => $K2, 'X-User' => $U2 })->{status} } 1 .. 5;
    is("@st", '200 200 200 429 429', 'cross_slot: zones a and b on two masters: 3 admitted, then rejected by a');
    settled_is(sub { $c->window_total(key('a', $K2)) . '/' . $c->window_total(key('b', $U2)) }, '3/3', 'cross_slot: rejected by a: counted in neither once the undo landed');

    # A subject's slot moved, its key with it, to another master behind
    # nginx's back: the old master refuses the key inside the script (no
    # MOVED), and the servers must find the new one.
    my $S = $c->key_in($m[0], 'xsMv', 'api');
    my $k = key('api', $S);
    my $slot = ClusterTest::keyslot($k);
    is(sr($T[0]->req('closed', $S)), '200/PASSED', "cross_slot: subject $S (slot $slot on $m[0]) PASSED");
    my ($from_id, $to_id) = map { $c->node_id($_) } $m[0], $m[1];
    # Every key of the slot goes: the earlier loads' keys may share it, and
    # a master refuses to give up a slot it still holds keys of.
    my $in_slot = $c->node($m[0], 'CLUSTER', 'GETKEYSINSLOT', $slot, 100000);
    my @keys = ref $in_slot eq 'ARRAY' && @$in_slot ? @$in_slot : ($k);
    my @moved = ($c->node($m[1], 'CLUSTER', 'SETSLOT', $slot, 'IMPORTING', $from_id),
                 $c->node($m[0], 'CLUSTER', 'SETSLOT', $slot, 'MIGRATING', $to_id),
                 $c->node($m[0], 'MIGRATE', '127.0.0.1', $m[1], '', 0, 5000, 'KEYS', @keys),
                 map { $c->node($_, 'CLUSTER', 'SETSLOT', $slot, 'NODE', $to_id) } $m[1], $m[0]);
    is("@moved", 'OK OK OK OK OK', "cross_slot: slot $slot and its key moved to $m[1]");
    ok(defined $c->wait_ok(10), 'cross_slot: every node agrees on the move');
    # Each server's first request after the move may get the fail policy
    # (closed: 503) while its worker asks for the map again.
    my @after;
    my $t0 = time;
    for my $i (0 .. 99) {
        push @after, sr($T[$i % 2]->req('closed', $S));
        last if $after[-1] ne '503/ERROR' || time - $t0 > 1;
        sleep 0.02;
    }
    push @after, map { sr($T[$_ % 2]->req('closed', $S)) } 1 .. 8;
    my %n;
    $n{$_}++ for @after;
    is($n{'200/PASSED'}, $LIMIT - 1, 'cross_slot: after the move, exactly the rest of the limit passed on the new master')
        or diag("@after");
    cmp_ok($n{'503/ERROR'} // 0, '<=', 4, 'cross_slot: at most a request per worker got the fail policy meanwhile')
        or diag("@after");
    is($c->window_total($k), $LIMIT, "cross_slot: $LIMIT counted there");
}

# --- cross_slot with overrides: calls name no markers, read every side key -----------------

{
    restart_overrides('cross_slot, overrides', "ratelimit_redis cluster $SEEDS cross_slot timeout=100ms connect_timeout=200ms fleet_secret_file=$fleetfile;");
    my @m = map { $_->{port} } $c->masters;
    my $S = $c->key_in($m[1], 'xoS', 'api');
    my $put = put_override($t2, "zone=api&key=$S&limit=8");
    is($put->{status}, 204, "cross_slot, overrides: PUT ?zone=api&key=$S&limit=8 through server 2: 204") or diag($put->{content});
    my @r = alternating('closed', $S, 10);
    is(FaultTest::statuses(@r) . ' / ' . (rhdr($r[0], 'X-RateLimit-Limit') // '-'), join(' ', ('200') x 8, '429', '429') . ' / 8',
        'cross_slot, overrides: 8 admitted from both servers, X-RateLimit-Limit 8');

    my $S2 = $c->key_in($m[2], 'xoS2', 'api');
    my $slot2 = ClusterTest::keyslot(key('api', $S2));
    is($c->node($m[2], 'SET', side('api', $S2), 'o=2,60000,0'), 'OK', "cross_slot, overrides: a side key of $S2 (slot $slot2) set by hand");
    is($c->node($m[2], 'EXISTS', ClusterTest::marker_key('rl', 'api', $slot2)), 0, "cross_slot, overrides: no marker in slot $slot2");
    my @r2 = alternating('closed', $S2, 4);
    is(FaultTest::statuses(@r2) . ' / ' . (rhdr($r2[0], 'X-RateLimit-Limit') // '-'), '200 200 429 429 / 2',
        'cross_slot, overrides: read all the same, with no marker: 2 admitted');

    # zones a (3) and b (5), subjects in two slots of one master: one call
    my $K = $c->key_in($m[0], 'xoK', 'a');
    my $U;
    do { $U = $c->key_in($m[0], 'xoU', 'b') } until ClusterTest::keyslot(key('b', $U)) != ClusterTest::keyslot(key('a', $K));
    is(put_override($t1, "zone=a&key=$K&limit=4")->{status}, 204, "cross_slot, overrides: zone a of $K raised to 4");
    my @r3 = alternating('two', $K, 6, $U);
    is(FaultTest::statuses(@r3), '200 200 200 200 429 429', 'cross_slot, overrides: zones a and b in two slots of one master: 4 admitted, then rejected by a');
    is($c->window_total(key('a', $K)) . '/' . $c->window_total(key('b', $U)), '4/4', 'cross_slot, overrides: a=4 and b=4 at once (one call, no undo)');
}

# --- bans (issue 43): in the subject's slot, lifted by a DELETE ------------------------------

{
    for my $t (@T) {
        $t->stop_nginx;
        conf($t, "ratelimit_redis cluster $SEEDS timeout=100ms connect_timeout=200ms fleet_secret_file=$fleetfile;", 0, 1);
        $t->start_nginx;
    }
    ok(defined(($T[$_]->wait_passed('open', 'ban-up', 5))[0]), 'bans: server ' . ($_ + 1) . ' PASSED') for 0, 1;
    $c->refresh;
    # Each worker subscribed to the forgive channel, on some node: one
    # that subscribes later forgets what it remembered, and misses what
    # was published before.
    ok(defined RateLimitTest::wait_until(sub {
        my $n = 0;
        for my $p ($c->live_ports) {
            my $r = eval { $c->node($p, 'PUBSUB', 'NUMSUB', 'rl:wake:forgive') };
            $n += $r->[1] if ref $r;
        }
        $n == 2 * $WORKERS }, 5), 'bans: every worker subscribed to the forgive channel');
    my @m = map { $_->{port} } $c->masters;
    my $S = $c->key_in($m[1], 'banS', 'bn');
    my $slot = ClusterTest::keyslot(key('bn', $S));
    my $marker = ClusterTest::marker_key('rl', 'bn', $slot);
    my @r = map { FaultTest::raw_get($T[$_ % 2]->port('PORT'), '/bn/index.html', { 'X-Api-Key' => $S }) } 0 .. 3;
    is(join(' ', map { sr($_) } @r), '200/PASSED 200/PASSED 429/REJECTED 429/BANNED',
        'bans: the 3rd request bans the subject, the 4th (the other server) is BANNED');
    my $after = rhdr($r[3], 'Retry-After') // 0;
    ok($after > 3590 && $after <= 3600, "bans: Retry-After $after, the ban's time left");
    like($c->node($m[1], 'GET', side('bn', $S)) // '', qr/^b=\d+$/, "bans: the side key holds b=END, on the subject's master");
    ok($c->node($m[1], 'ZSCORE', $marker, side('bn', $S)), "bans: $marker lists it");
    is(join(' ', map { $c->node($m[1], 'CLUSTER', 'KEYSLOT', $_) } key('bn', $S), side('bn', $S), $marker),
        "$slot $slot $slot", "bans: the count key, the side key and the marker in one slot ($slot)");
    is($c->window_total(key('bn', $S)), 2, 'bans: the refused requests counted nothing');

    my $del = HTTP::Tiny->new(timeout => 5)->request('DELETE', $t1->url("/bq?zone=bn&key=$S"));
    is($del->{status}, 204, 'bans: DELETE through server 1: 204') or diag($del->{content});
    is($c->node($m[1], 'EXISTS', side('bn', $S)) . '/' . ($c->node($m[1], 'ZSCORE', $marker, side('bn', $S)) // 'none'),
        '0/none', 'bans: the side key gone, and out of the marker');
    # Server 2 refused the 4th request, and remembers the ban: the
    # forgiving reaches its workers through the cluster bus (their
    # subscriptions may be on other nodes) before their next request.
    is(sr($t2->req('bn', $S)) . ' ' . sr($t1->req('bn', $S)), '200/PASSED 200/PASSED',
       'bans: lifted at once on both servers');
}

$T[$_]->stop_and_check('server ' . ($_ + 1)) for 0, 1;

done_testing;
