#!/usr/bin/perl
# The Redis module's command (redis_module/) in use, and the fallback to the
# window script.
#
# Expected (spec: docs/redis-module.md):
# - on a Redis with the module, each worker's connection says at notice that
#   it uses ratelimit.decide, and the requests are decided by it (INFO
#   commandstats: calls of the command, none of EVALSHA), to the limit; on
#   one without it, it says at info (not a fault) that it uses the script;
# - the module unloaded under a live connection (MODULE UNLOAD): the batch
#   answered "unknown command" ran nothing and is sent again as the script
#   (EVAL), so no request fails; the script goes on counting the keys the
#   command wrote, and the connection says it uses the script;
# - Redis restarted without the module under load: the requests of the
#   outage get the fail policy, every connection made after says it uses the
#   script, and the limit holds through EVALSHA; restarted with the module,
#   the connections use the command again;
# - its keys are declared as EVAL's are: COMMAND GETKEYS lists them, an ACL
#   user whose key pattern leaves one out is refused (NOPERM) by both, and a
#   cluster node refuses keys of two hash slots (CROSSSLOT) from both, and
#   keys of another node's slots with MOVED;
# - zone numbers nginx never sends (infinities, NaN, 1e-300, 1e300,
#   fractions, 0, a limit over 2^53, a window, bucket * span, over 1000000w
#   in ms), an unknown zone kind or mode (once read as a sliding window, as
#   dry run) and an interval peek of more buckets than that: the command
#   and the script both answer an error, the same for a kind or mode,
#   write no key and send replicas and the AOF nothing; the largest limit
#   and window are decided, the key expiring at the end of its window.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use List::Util qw(min);
use FaultTest qw(rhdr);
use RateLimitTest qw(fail_policy_http);
use ClusterTest;

RateLimitTest::require_module();
my $SO = RateLimitTest::redis_module_so() or BAIL_OUT('redis module not built');

my $WORKERS = 2;
my $t = FaultTest->new(workers => $WORKERS);
my $RPORT = $t->redis_port;
$t->start_redis(redis_module => 1, args => ['--enable-module-command', 'yes']);

$t->write_conf(fail_policy_http(
    'ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=200ms connect_timeout=200ms;',
    limit => 3), error_log_level => 'info');
$t->start_nginx;

# The command in use is told at notice; its absence, the usual case, at
# info (the error log is at info here: both are written, each with its
# level).
my $USES_COMMAND = qr/\[notice\] [^\n]*ratelimit: redis at "127\.0\.0\.1:$RPORT" has ratelimit\.decide: this connection uses it/;
my $USES_SCRIPT = qr/\[info\] [^\n]*ratelimit: redis at "127\.0\.0\.1:$RPORT" cannot run ratelimit\.decide \(ERR unknown command[^)]*\): this connection uses the window script/;

sub statuses { join ' ', map { $_->{status} } @_ }

# --- 1. the command in use --------------------------------------------------

cmp_ok($t->wait_log($USES_COMMAND, $WORKERS, 3), '>=', $WORKERS, 'each worker\'s connection says it uses ratelimit.decide');
my ($when) = $t->wait_passed('open', 'warm', 3);
ok(defined $when, 'requests pass');
my @r = map { $t->req('open', 'k1') } 1 .. 5;
is(statuses(@r), '200 200 200 429 429', 'the command admits the limit');
is(statuses(map { $t->req('open', 'k3') } 1 .. 2), '200 200', 'another subject, below its limit');
cmp_ok($t->commandstat('ratelimit.decide'), '>=', 8, 'requests decided by ratelimit.decide');
is($t->commandstat('evalsha') + $t->commandstat('eval'), 0, 'no script called');

# --- 2. the module unloaded under a live connection ------------------------

{
    my $before = $t->commandstat('eval');
    is($t->redis('MODULE', 'UNLOAD', 'ratelimit'), 'OK', 'module unloaded');
    my @k2 = map { $t->req('open', 'k2') } 1 .. 2;
    is(statuses(@k2), '200 200', 'after the unload: no request failed');
    is(join(' ', map { rhdr($_, 'X-RL-Status') } @k2), 'PASSED PASSED', 'after the unload: decided by the script');
    cmp_ok($t->commandstat('eval'), '>', $before, 'the refused batch sent again with EVAL');
    # k3 was counted twice by the command: the script counts on from its
    # hash.
    is(statuses(map { $t->req('open', 'k3') } 1 .. 2), '200 429', 'the script counts on the keys the command wrote');
    my @k2more = map { $t->req('open', 'k2') } 1 .. 2;
    is(statuses(@k2more), '200 429', 'the script keeps the limit');
    is($t->redis_window_total('rl:api:k2'), 3, 'counted once each, none twice');
    ok($t->wait_log(qr/ratelimit: redis at "127\.0\.0\.1:$RPORT" no longer knows ratelimit\.decide: this connection uses the window script/, 1, 2),
       'the connection says it uses the script now');
    is($t->redis('MODULE', 'LOAD', $SO), 'OK', 'module loaded again');
}

# --- 3. Redis restarted without the module, under load ---------------------

{
    $t->stop_redis;
    $t->start_redis(port => $RPORT, redis_module => 1);
    cmp_ok($t->wait_log($USES_COMMAND, 2 * $WORKERS, 4), '>=', 2 * $WORKERS, 'restarted with the module: the command again');

    my $load = $t->start_load(
        clients => 4, max_seconds => 10, max_requests => 3000, pause => 0.005,
        pick => sub { my ($c, $i) = @_; (($c % 2 ? 'closed' : 'open'), "L$c-$i") },
    );
    sleep 0.8;
    my $t_kill = time;
    $t->stop_redis;
    sleep 0.3;
    $t->start_redis(port => $RPORT, redis_module => 0);
    my $t_up = time;
    cmp_ok($t->wait_log($USES_SCRIPT, $WORKERS, 4), '>=', $WORKERS, 'restarted without the module: each connection says it uses the script');
    sleep 1.0;
    my @rec = $t->finish_load($load);
    ok(@rec > 100, 'load produced requests (' . scalar(@rec) . ')');
    my @closed_after = grep { $_->{loc} eq 'closed' && $_->{t0} > $t_up + 0.5 } @rec;
    ok(@closed_after > 5 && !(grep { $_->{status} != 200 || $_->{rs} ne 'PASSED' } @closed_after),
       'after the restart, fail closed: every request 200 PASSED (' . scalar(@closed_after) . ')')
        or diag(join ' ', map { "$_->{status}/$_->{rs}" } @closed_after);
    my @open_bad = grep { $_->{loc} eq 'open' && $_->{status} != 200 } @rec;
    is(scalar @open_bad, 0, 'fail open: every request 200 through the restart');
    my @s = map { $t->req('closed', 'after') } 1 .. 4;
    is(statuses(@s), '200 200 200 429', 'the script keeps the limit after the fallback');
    cmp_ok($t->commandstat('evalsha'), '>', 0, 'decided by EVALSHA');
    is($t->commandstat('ratelimit.decide'), 0, 'the command is not there, and not called');
    note(sprintf 'outage from +0 to +%.2fs', $t_up - $t_kill);
}

# --- 4. keys declared --------------------------------------------------------

{
    $t->stop_redis;
    $t->start_redis(port => $RPORT, redis_module => 1);
    my $sha = $t->redis('SCRIPT', 'LOAD', RateLimitTest::window_script());
    my @call = (2, 'rl:a', 'other:b', 1, 3, 1000, 60, 's', '1', "c\x00", "c\x00");
    is_deeply($t->redis('COMMAND', 'GETKEYS', 'ratelimit.decide', @call), ['rl:a', 'other:b'],
              'COMMAND GETKEYS: the keys');
    is($t->redis('ACL', 'SETUSER', 'rl', 'on', '>pw', '~rl:*', '+@all'), 'OK', 'ACL user of rl:* keys');
    my $as_user = sub { RateLimitTest::redis_at({ host => '127.0.0.1', port => $RPORT, auth => ['rl', 'pw'] }, @_) };
    my $native = $as_user->('ratelimit.decide', @call);
    my $script = $as_user->('EVALSHA', $sha, @call);
    like("$native", qr/^NOPERM/, 'a key outside the user\'s pattern: the command refused');
    like("$script", qr/^NOPERM/, 'a key outside the user\'s pattern: the script refused too');
    my $ok = $as_user->('ratelimit.decide', 1, 'rl:a', 1, 3, 1000, 60, 's', '1', "c\x00");
    is(ref $ok eq 'ARRAY' ? scalar @$ok : "$ok", 5, 'keys inside the pattern: decided');
}

# A cluster of one node serving half the slots (its bus port, + 10000, free
# too).
{
    my $port = $t->cluster_port('CLUSTER');
    my $pid = $t->start_redis_server(name => 'cluster', port => $port, redis_module => 1,
        args => ['--cluster-enabled', 'yes', '--cluster-config-file', $t->tmp . '/nodes.conf']);
    my $node = sub { RateLimitTest::redis_at({ host => '127.0.0.1', port => $port }, @_) };
    $node->('CLUSTER', 'ADDSLOTSRANGE', 0, 8191);
    my $sha = $node->('SCRIPT', 'LOAD', RateLimitTest::window_script());
    # {a} and {b} hash to different slots; {a} (15495) is not served here,
    # {b} (3300) and {c} (7365) are.
    my @two_slots = (2, 'rl:{b}:1', 'rl:{c}:2', 1, 3, 1000, 60, 's', '1', "c\x00", "c\x00");
    like("" . $node->('ratelimit.decide', @two_slots), qr/^CROSSSLOT/, 'cluster: keys of two slots: the command refused');
    like("" . $node->('EVALSHA', $sha, @two_slots), qr/^CROSSSLOT/, 'cluster: keys of two slots: the script refused');
    my @elsewhere = (1, 'rl:{a}:1', 1, 3, 1000, 60, 's', '1', "c\x00");
    like("" . $node->('ratelimit.decide', @elsewhere), qr/^(?:MOVED|CLUSTERDOWN)/, 'cluster: a slot not served here: the command refused');
    like("" . $node->('EVALSHA', $sha, @elsewhere), qr/^(?:MOVED|CLUSTERDOWN)/, 'cluster: the script refused alike');
    $t->stop_process($pid);
}

# --- 5. a cluster whose nodes differ: each connection asks its own ----------

{
    my $ct = FaultTest->new(workers => 1);
    my $cl = ClusterTest->new($ct, masters => 3, replicas => 0, redis_module => { 1 => 1, 2 => 0, 3 => 1 });
    $cl->start(20) or BAIL_OUT('cluster did not come up');
    $ct->write_conf(<<"EOF", error_log_level => 'info');
ratelimit_redis cluster @{[ $cl->seeds ]} timeout=1s;
ratelimit_zone z key=\$http_x_api_key limit=3 window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    location /open/ { ratelimit zone=z; alias %%TMP%%/html/; }
}
EOF
    $ct->start_nginx;
    my @ports = $cl->ports;
    my %uses;
    for my $i (0 .. 2) {
        my $p = $ports[$i];
        my $s = $cl->key_in($p, "node$i");
        my @r = map { $ct->get('/open/index.html', { 'X-Api-Key' => $s }) } 1 .. 4;
        is(statuses(@r), '200 200 200 429', 'node ' . ($i + 1) . ': the limit holds');
        my %st = $cl->node($p, 'INFO', 'commandstats') =~ /cmdstat_([\w.|]+):calls=(\d+)/g;
        $uses{$i} = join ' ', map { "$_=" . ($st{$_} // 0) } qw(ratelimit.decide evalsha);
    }
    like($uses{0}, qr/^ratelimit\.decide=[1-9]/, "node 1 (the module) decides by its command: $uses{0}");
    like($uses{1}, qr/^ratelimit\.decide=0 evalsha=[1-9]/, "node 2 (no module) by the script: $uses{1}");
    like($uses{2}, qr/^ratelimit\.decide=[1-9]/, "node 3 (the module) by its command: $uses{2}");
    my $log = $ct->error_log;
    ok(($log =~ /\[notice\] [^\n]*redis at "127\.0\.0\.1:$ports[0]" has ratelimit\.decide: this connection uses it/)
        && ($log =~ /\[notice\] [^\n]*redis at "127\.0\.0\.1:$ports[2]" has ratelimit\.decide: this connection uses it/)
        && ($log =~ /\[info\] [^\n]*redis at "127\.0\.0\.1:$ports[1]" cannot run ratelimit\.decide .*the window script/),
        'the log says which one each node\'s connection uses')
        or diag(join "\n", grep { /ratelimit\.decide/ } split /\n/, $log);
    $ct->final_checks;
    $ct->stop_all;
}

# --- 6. zone numbers nginx never sends ------------------------------------

# The commands Redis wrote to the AOF (what replicas are sent too).
sub aof_commands {
    my ($dir) = @_;
    my $text = '';
    for my $file (glob "$dir/*.incr.aof") {
        open my $fh, '<:raw', $file or die "$file: $!";
        local $/;
        $text .= <$fh>;
    }
    my @commands;
    while ($text =~ /\G\*(\d+)\r\n/gc) {
        my @argv;
        for (1 .. $1) {
            $text =~ /\G\$(\d+)\r\n/gc or die "$dir: not an AOF\n";
            my $len = $1;
            push @argv, substr($text, pos($text), $len);
            pos($text) += $len + 2;
        }
        push @commands, \@argv;
    }
    return @commands;
}

{
    my $port = $t->free_port;
    my $aof = 'numbers-aof';
    my $pid = $t->start_redis_server(name => 'numbers', port => $port, redis_module => 1,
        args => ['--appendonly', 'yes', '--appendfsync', 'always', '--appenddirname', $aof]);
    my $node = sub { RateLimitTest::redis_at({ host => '127.0.0.1', port => $port }, @_) };
    my $sha = $node->('SCRIPT', 'LOAD', RateLimitTest::window_script());
    my %decide = (command => sub { $node->('ratelimit.decide', @_) },
                  script => sub { $node->('EVALSHA', $sha, @_) });
    # limit, bucket ms, buckets per window
    my @bad = (['inf', 1000, 60], [3, 'inf', 60], [3, 1000, 'inf'], ['-inf', 1000, 60],
               ['nan', 1000, 60], [3, 'nan', 60], [3, 1000, 'nan'],
               [3, '1e-300', 60], [3, 1000, '1e-300'], [3, '1e300', 60], [3, 1000, '1e300'],
               ['1e300', 1000, 60], [0, 1000, 60], [-3, 1000, 60], [3, 0, 60], [3, 1000, 0],
               [3, -1000, 60], [2.5, 1000, 60], [3, 0.5, 60], [3, 1000, 1.5],
               ['9007199254740994', 1000, 60], [3, '604800000000001', 1],
               [3, 1000, '604800000001'], [3, '1e15', 1000]);
    my $n = 0;
    for my $name (sort keys %decide) {
        my @taken;
        for my $zone (@bad) {
            for my $kind ('s', 'f') {
                my $r = $decide{$name}->(1, 'rl:bad:' . $n++, 1, @$zone, $kind, '1', "c\x00");
                push @taken, "[@$zone $kind]: " . (ref $r eq 'ARRAY' ? "@$r" : "$r")
                    unless "$r" =~ /^ERR ratelimit: a zone's limit, bucket and span must be whole numbers from 1, the limit at most 2\^53, bucket \* span at most 604800000000000 ms$/;
            }
        }
        is(scalar @taken, 0, "the $name refuses every zone number nginx never sends (" . 2 * @bad . ')')
            or diag(join "\n", @taken);
        # kind, mode
        my @unknown = (['x', '1'], ['S', '1'], ['', '1'], ['sf', '1'], ['gcra', '0'],
                       ['s', '2'], ['f', ''], ['g', 'yes'], ['s', '10']);
        @taken = ();
        for my $zone (@unknown) {
            my $r = $decide{$name}->(1, 'rl:bad:' . $n++, 1, 3, 1000, 60, @$zone, "c\x00");
            push @taken, "[@$zone]: " . (ref $r eq 'ARRAY' ? "@$r" : "$r")
                unless "$r" eq 'ERR ratelimit: unknown zone kind or mode';
        }
        is(scalar @taken, 0, "the $name refuses every unknown zone kind and mode (" . @unknown . ')')
            or diag(join "\n", @taken);
        my $r = $decide{$name}->(1, "rl:bad:$n", 1, 3, 1000, 60, 's', '1', "i604800000000001:\x00");
        my $error = ref $r eq 'ARRAY' ? $r->[1] : $r;
        like("$error", qr/interval peek/, "the $name refuses an interval peek of more buckets than a window has");
    }
    is($node->('DBSIZE'), 0, 'no key written');

    for my $name (sort keys %decide) {
        my $key = "rl:largest:$name";
        my $r = $decide{$name}->(1, $key, 1, '9007199254740992', '604800000000000', 1, 'f', '1', "c\x00");
        is(ref $r eq 'ARRAY' ? "@$r[1 .. 4]" : "$r", '0 1 0 0', "the $name: the largest limit and window: counted");
        is($node->('PEXPIRETIME', $key), 604800000000000, "the $name: the key expires at the end of its window");
    }

    my @writes = aof_commands($t->tmp . "/$aof");
    my @bad_writes = grep { grep { /^rl:bad:/ } @$_ } @writes;
    my @past = grep { uc $_->[0] eq 'PEXPIREAT' && $_->[2] !~ /^[1-9]\d*$/ } @writes;
    is(scalar @bad_writes, 0, 'nothing written for the refused calls')
        or diag(join "\n", map { "@$_" } @bad_writes[0 .. min(4, $#bad_writes)]);
    is(scalar @past, 0, 'no expiry time that is not a positive number written')
        or diag(join "\n", map { "@$_" } @past[0 .. min(4, $#past)]);
    is(scalar(grep { uc $_->[0] eq 'PEXPIREAT' && $_->[2] eq '604800000000000' } @writes), 2,
       'the AOF has the two keys of the largest window and their expiry');
    $t->stop_process($pid);
}

$t->final_checks;
$t->stop_all;
done_testing();
