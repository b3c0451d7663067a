#!/usr/bin/perl
# Redis over TLS: ratelimit_redis_ssl and its certificate directives against
# a real redis-server with a TLS port (certificates made here by openssl:
# root CA -> intermediate CA -> server leaf, the server sending the chain).
#
# Expected (spec): limiting is exact over TLS with the default verify depth
# (an intermediate accepted) and the IP address as the name; a certificate
# that fails verification (unknown CA, the system CA store by default,
# expired, chain longer than the verify depth), a name mismatch, or a server
# that wants a client certificate and got none gives one clear error-log line
# naming the cause (at most once a second per worker), the fail policy, and
# reconnects with backoff (no storm); with a client certificate, an ACL user
# and a db limiting is exact and keys land in that db; TLS also to the
# sentinels (sentinel=) and the master they name; SNI sent for a host name
# (or when asked, but never an IP address), with ratelimit_redis_ssl_name;
# SIGKILL + restart and SIGSTOP of Redis under TLS are survived as over plain
# TCP; 10 reloads under load leave no fds behind; ssl_verify off accepts any
# certificate. No [alert], no crashed worker.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use FaultTest qw(raw_get rhdr sr rems);
use RateLimitTest qw(fail_policy_http);
use TestCerts;

RateLimitTest::require_module();

my $WORKERS = 2;
my $t = FaultTest->new(workers => $WORKERS);
my $tmp = $t->tmp;
my $pki = TestCerts->new("$tmp/pki");
my $TLS = $t->port('TLS_PORT');
my $LIMIT = 5;
my $TIMEOUT = 0.2;
my $MARGIN = 0.5;    # generous: shared 2-core machine

my $STOPPED;    # a SIGSTOPped redis must not outlive a failed test
END { kill 'CONT', $STOPPED if $STOPPED }

sub start_tls_redis {
    $t->start_redis(args => [ $pki->redis_tls_args($TLS), '--tls-protocols', 'TLSv1.2 TLSv1.3' ]);
}

# nginx with ratelimit_redis at the TLS port; $params go on ratelimit_redis,
# $ssl replaces the TLS directives (default: on, trusting our root CA).
sub conf {
    my (%o) = @_;
    my $params = $o{params} // '';
    my $ssl = $o{ssl} // "ratelimit_redis_ssl on;\nratelimit_redis_ssl_trusted_certificate $pki->{ca};\n";
    my $addr = $o{addr} // "127.0.0.1:$TLS";
    my $ms = int($TIMEOUT * 1000);
    $t->write_conf(fail_policy_http(
        "ratelimit_redis $addr $params timeout=${ms}ms connect_timeout=500ms;\n$ssl\n",
        limit => $LIMIT, free => 1));
}

sub start_nginx_with {
    my (%o) = @_;
    $t->stop_nginx;
    unlink "$tmp/error.log", "$tmp/access.log";
    conf(%o);
    my ($st, $out) = $t->nginx_t;
    is($st, 0, "$o{name}: nginx -t passes") or do { diag($out); return 0 };
    return eval { $t->start_nginx; 1 } || do { fail("$o{name}: nginx starts: $@"); 0 };
}

# Connections redis saw: those accepted, plus those whose TLS handshake it
# refused (not counted in INFO, logged one a line in its output).
sub connections_received {
    my $info = $t->redis('INFO', 'stats');
    my $n = $info =~ /^total_connections_received:(\d+)/m ? $1 : die "INFO stats: $info";
    my $out = RateLimitTest::_read_file("$tmp/redis.out");
    return $n + (() = $out =~ /Error accepting a client connection/g);
}

# Waits until redis has one connection per worker (all workers back).
sub wait_all_connected {
    my $deadline = time + 4;
    my @c;
    while (1) {
        @c = $t->redis_clients;
        return 1 if @c >= $WORKERS;
        return 0 if time > $deadline;
        sleep 0.05;
    }
}

# $n concurrent requests for one fresh key: "passed/rejected/other".
sub hammer {
    my ($key, $n, $loc) = @_;
    my @r = $t->burst($n, sub { ("/" . ($loc // 'closed') . "/index.html", { 'X-Api-Key' => $key }) }, 5);
    my %c;
    for (@r) {
        my $k = $_->{status} == 200 && (rhdr($_, 'X-RL-Status') // '') eq 'PASSED' ? 'p'
              : $_->{status} == 429 ? 'r' : 'o';
        $c{$k}++;
    }
    return join '/', map { $c{$_} // 0 } qw(p r o);
}

# works(name, %conf): limiting exact over the connection described by %conf.
sub works {
    my ($name, %o) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    start_nginx_with(name => $name, %o) or return;
    my ($when, $r) = $t->wait_passed('open', "w-$name-", 3);
    ok(defined $when, "$name: PASSED") or diag('last: ' . sr($r) . "\n" . join "\n", grep { /ratelimit/ } split /\n/, $t->error_log);
    my $key = "exact-$name";
    $key =~ s/\W/_/g;
    is(hammer($key, $LIMIT + 4), "$LIMIT/4/0", "$name: $LIMIT + 4 concurrent requests: exactly $LIMIT passed, 4 rejected");
    is($t->redis_window_total("rl:api:$key", $o{db}), $LIMIT, "$name: counted in redis") if !$o{no_count};
    $t->stop_nginx;
    $t->final_checks;
    return $key;
}

# refused(name, log regex, %conf): fail policy, one clear log line naming the
# cause; with backoff => 1 also the retry rate and the log throttle.
sub refused {
    my ($name, $re, %o) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my $c0 = connections_received();
    my $t0 = time;
    start_nginx_with(name => $name, %o) or return;
    my @o = map { $t->req('open', "o-$name") } 1 .. $LIMIT + 1;
    is(join(' ', map { sr($_) } @o), join(' ', ('200/ERROR') x @o), "$name: fail open passes with ERROR (over the limit too)");
    my $c = $t->req('closed', "c-$name");
    is(sr($c), '503/ERROR', "$name: fail closed 503");
    my ($max) = sort { $b <=> $a } map { $_->{elapsed} } @o, $c;
    cmp_ok($max, '<', $TIMEOUT + $MARGIN, sprintf('%s: answered within timeout + margin (%.3fs)', $name, $max));
    ok($t->wait_log($re, 1, 3), "$name: error.log names the cause")
        or diag(join "\n", grep { /ratelimit/ } split /\n/, $t->error_log);
    my ($first) = grep { /ratelimit: (?:cannot connect|lost connection)/ } split /\n/, $t->error_log;
    like($first // '', $re, "$name: the first connection error already names the cause");
    if (!$o{backoff}) {    # the retry rate and the log throttle: in a few cases only (time)
        $t->stop_nginx;
        $t->final_checks;
        return;
    }
    sleep($t0 + 2.2 - time) if $t0 + 2.2 > time;
    my $n = connections_received() - $c0;
    my $el = time - $t0;
    cmp_ok($n, '>=', 2 * $WORKERS, "$name: the workers keep retrying ($n connections)");
    cmp_ok($n / $el / $WORKERS, '<', 10, sprintf('%s: with backoff (%.1f connections/s/worker)', $name, $n / $el / $WORKERS));
    my $lines = $t->count_log($re);
    cmp_ok($lines, '<=', (int($el) + 2) * $WORKERS, "$name: cause logged at most once a second per worker ($lines lines in ${\ sprintf '%.1f', $el}s)");
    $t->throttle_ok("$name: redis problems logged at most once a second per worker");
    $t->stop_nginx;
    $t->final_checks;
}

# ---------------------------------------------------------------------------

start_tls_redis();

# the helper's own certificates work with redis's TLS port (redis-cli, if it has TLS)
SKIP: {
    my $help = `redis-cli --help 2>&1`;
    skip 'redis-cli without --tls', 1 unless $help =~ /--tls\b/;
    my $out = `redis-cli --tls --cacert $pki->{ca} -h 127.0.0.1 -p $TLS PING 2>&1`;
    like($out, qr/PONG/, 'redis-cli --tls with the test CA: PONG (the TLS redis is right)');
}

# --- working configurations -------------------------------------------------------

works('TLS, IP address as the name, intermediate CA at the default depth');
works('TLS, ratelimit_redis_ssl_name redis.test',
    ssl => "ratelimit_redis_ssl on;\nratelimit_redis_ssl_trusted_certificate $pki->{ca};\nratelimit_redis_ssl_name redis.test;\n");
works('TLS, verify off, unrelated CA',
    ssl => "ratelimit_redis_ssl on;\nratelimit_redis_ssl_trusted_certificate $pki->{other_ca};\nratelimit_redis_ssl_verify off;\n");

# A worker that connects again resumes its last TLS session (an abbreviated
# handshake, no certificate sent or checked again).
if (start_nginx_with(name => 'session resumption')) {
    my $addr = qr/ratelimit: connected to redis at "127\.0\.0\.1:$TLS"/;
    # Each worker has read its first reply (the command probe's), and with
    # it the session ticket a TLS 1.3 server sends after the handshake.
    my $probed = qr/ratelimit: redis at "127\.0\.0\.1:$TLS" (?:has|cannot run) /;
    ok(defined(($t->wait_passed('open', 'resume-', 3))[0]) && $t->wait_log($probed, $WORKERS, 5) >= $WORKERS,
        'session resumption: the workers connected');
    is($t->count_log(qr/$addr \(TLS session resumed\)/), 0, '... first with a full handshake');
    $t->redis('CLIENT', 'KILL', 'TYPE', 'normal');
    $t->req('open', "resume-$_") for 1 .. 4;
    ok($t->wait_log(qr/$addr \(TLS session resumed\)/, $WORKERS, 3), '... then, cut off by redis, each resumed its session')
        or diag(join "\n", grep { /ratelimit/ } split /\n/, $t->error_log);
    $t->stop_nginx;
    $t->final_checks;
}

# TLS applies to the sentinels too: a sentinel with a TLS port only names the
# TLS port of the master
{
    my ($SP, $ST) = ($t->port('SENT_PLAIN'), $t->port('SENT_TLS'));
    my $pid = $t->start_redis_server(name => 'tls-sentinel', port => $SP, sentinel => 1,
        conf => $pki->sentinel_tls_conf($ST) . "sentinel monitor tlsmaster 127.0.0.1 $TLS 1\n");
    my $addr = RateLimitTest::redis_at({ port => $SP }, 'SENTINEL', 'get-master-addr-by-name', 'tlsmaster');
    is(ref $addr ? "@$addr" : $addr, "127.0.0.1 $TLS", 'the TLS sentinel names the TLS port of redis');
    works('TLS to the sentinel and to the master it names', addr => "127.0.0.1:$ST", params => 'sentinel=tlsmaster');
    $t->stop_process($pid);
}

# --- SNI (ratelimit_redis_ssl_server_name), against openssl s_server: with the
#     server name "localhost" it shows a certificate from our CA, without it one
#     from the unrelated CA, and to another name it answers a fatal alert ----------
{
    my $SNI = $t->port('SNI_PORT');
    my $pid = $t->_spawn('openssl s_server', "$tmp/s_server.out", 'openssl', 's_server',
        '-accept', $SNI, '-quiet', '-www',
        '-cert', $pki->{stranger_server}, '-key', $pki->{stranger_server_key},
        '-cert2', $pki->{server_root}, '-key2', $pki->{server_root_key},
        '-servername', 'localhost', '-servername_fatal');
    my $deadline = time + 5;
    sleep 0.05 until RateLimitTest::_port_open($SNI) || time > $deadline;
    my $ca = "ratelimit_redis_ssl on;\nratelimit_redis_ssl_trusted_certificate $pki->{ca};\n";
    my $VF = qr/ratelimit: cannot connect to redis at "[^"]+": certificate verify failed/;
    for my $c (
        ['host name: SNI by default', "localhost:$SNI", '', 'ok'],
        ['host name, ratelimit_redis_ssl_server_name off', "localhost:$SNI", "ratelimit_redis_ssl_server_name off;\n", $VF],
        ['IP address: no SNI by default', "127.0.0.1:$SNI", '', $VF],
        ['IP address, ratelimit_redis_ssl_server_name on: no SNI (RFC 6066: never an IP address)', "127.0.0.1:$SNI",
            "ratelimit_redis_ssl_server_name on;\n", $VF],
        ['IP address, ratelimit_redis_ssl_name localhost, server_name on', "127.0.0.1:$SNI",
            "ratelimit_redis_ssl_name localhost;\nratelimit_redis_ssl_server_name on;\n", 'ok'],
        ['host name, ratelimit_redis_ssl_name other.test: SNI other.test', "localhost:$SNI",
            "ratelimit_redis_ssl_name other.test;\n", qr/ratelimit: cannot connect to redis at "[^"]+": [^\n]*handshake[^\n]*unrecognized name/i],
    ) {
        my ($name, $addr, $extra, $want) = @$c;
        start_nginx_with(name => "SNI, $name", addr => $addr, ssl => $ca . $extra) or next;
        $t->req('open', "sni$_") for 1 .. 2;
        if (ref $want) {
            ok($t->wait_log($want, 1, 3), "SNI, $name: the certificate for no / another name (the log says why)")
                or diag(join "\n", grep { /ratelimit/ } split /\n/, $t->error_log);
        } else {
            ok($t->wait_log(qr/ratelimit: (?:connected to|lost connection to) redis at "\Q$addr\E"/, 1, 3),
                "SNI, $name: TLS established with the certificate for localhost")
                or diag(join "\n", grep { /ratelimit/ } split /\n/, $t->error_log);
            is($t->count_log(qr/certificate verify failed|unrecognized name/), 0, "SNI, $name: no verification failure")
                or diag(join "\n", grep { /ratelimit/ } split /\n/, $t->error_log);
        }
        $t->stop_nginx;
        $t->final_checks;
    }
    $t->stop_process($pid);
}

# --- certificates refused ---------------------------------------------------------

my $A = qr/ratelimit: cannot connect to redis at "127\.0\.0\.1:$TLS": /;
refused('unrelated CA', qr/${A}certificate verify failed[^\n]*unable to get (?:local )?issuer certificate/, backoff => 1,
    ssl => "ratelimit_redis_ssl on;\nratelimit_redis_ssl_trusted_certificate $pki->{other_ca};\n");
refused('system CA store (default)', qr/${A}certificate verify failed[^\n]*unable to get (?:local )?issuer certificate/,
    ssl => "ratelimit_redis_ssl on;\n");
refused('name mismatch', qr/${A}certificate does not match "other\.test"/,
    ssl => "ratelimit_redis_ssl on;\nratelimit_redis_ssl_trusted_certificate $pki->{ca};\nratelimit_redis_ssl_name other.test;\n");
refused('verify depth 0, chain with an intermediate', qr/${A}certificate verify failed/,
    ssl => "ratelimit_redis_ssl on;\nratelimit_redis_ssl_trusted_certificate $pki->{ca};\nratelimit_redis_ssl_verify_depth 0;\n");
is($t->redis('CONFIG', 'SET', 'tls-protocols', 'TLSv1.3'), 'OK', 'redis accepts TLSv1.3 only');
refused('handshake refused: ratelimit_redis_ssl_protocols TLSv1.2 against a TLSv1.3-only redis',
    qr/${A}[^\n]*handshake[^\n]*protocol version/i, backoff => 1,
    ssl => "ratelimit_redis_ssl on;\nratelimit_redis_ssl_trusted_certificate $pki->{ca};\nratelimit_redis_ssl_protocols TLSv1.2;\n");
is($t->redis('CONFIG', 'SET', 'tls-protocols', 'TLSv1.2 TLSv1.3'), 'OK', 'redis accepts TLSv1.2 and TLSv1.3 again');

# expired server certificate: the same redis, certificate swapped
is($t->redis('CONFIG', 'SET', 'tls-cert-file', $pki->{expired_chain}, 'tls-key-file', $pki->{expired_key}), 'OK',
    'redis now serves the expired certificate');
refused('expired certificate', qr/${A}certificate verify failed[^\n]*certificate has expired/);
is($t->redis('CONFIG', 'SET', 'tls-cert-file', $pki->{server_chain}, 'tls-key-file', $pki->{server_key}), 'OK',
    'redis serves the valid certificate again');

# --- mutual TLS -------------------------------------------------------------------

is($t->redis('CONFIG', 'SET', 'tls-auth-clients', 'yes'), 'OK', 'redis requires client certificates');
my $CR = qr/ratelimit: (?:cannot connect to|lost connection to) redis at "127\.0\.0\.1:$TLS": [^\n]*(?:certificate required|handshake)/i;
refused('client certificate required, none given', $CR, backoff => 1);
refused('client certificate from an unrelated CA', qr/ratelimit: (?:cannot connect to|lost connection to) redis at "127\.0\.0\.1:$TLS": [^\n]*(?:unknown ca|certificate|handshake)/i,
    ssl => "ratelimit_redis_ssl on;\nratelimit_redis_ssl_trusted_certificate $pki->{ca};\n"
         . "ratelimit_redis_ssl_certificate $pki->{other_client};\nratelimit_redis_ssl_certificate_key $pki->{other_client_key};\n");
my $MTLS = "ratelimit_redis_ssl on;\nratelimit_redis_ssl_trusted_certificate $pki->{ca};\n"
         . "ratelimit_redis_ssl_certificate $pki->{client};\nratelimit_redis_ssl_certificate_key $pki->{client_key};\n";
works('mutual TLS with a client certificate', ssl => $MTLS);

# --- TLS + ACL user + db ----------------------------------------------------------

is($t->redis('ACL', 'SETUSER', 'rltls', 'on', '>tls-user-pw', '~*', '+@all'), 'OK', 'ACL user rltls');
{
    my $key = works('mutual TLS, ACL user, db 5', ssl => $MTLS, params => 'user=rltls password=tls-user-pw db=5', db => 5) // '';
    my @in5 = $t->redis_keys('rl:api:*', 5);
    my @in0 = $t->redis_keys('rl:api:*', 0);
    ok((grep { $_ eq "rl:api:$key" } @in5), 'ACL user + db 5: the key is in db 5');
    ok(!(grep { /^rl:api:exact-mutual_TLS__ACL/ } @in0), 'ACL user + db 5: not in db 0');
    my @users = grep { /\buser=rltls\b/ } $t->redis_clients;
    note(scalar(@users) . ' connections of rltls left (nginx stopped)');
}
is($t->redis('CONFIG', 'SET', 'tls-auth-clients', 'no'), 'OK', 'client certificates optional again');

# --- SIGKILL and restart under TLS load -------------------------------------------

start_nginx_with(name => 'kill under TLS load');
{
    my ($up) = $t->wait_passed('open', 'kw', 3);
    ok(defined $up, 'kill: PASSED before');
    my $load = $t->start_load(clients => 3, max_seconds => 12, max_requests => 3000, pause => 0.01,
        pick => sub { my ($c, $i) = @_; ((qw(open closed free))[$c], "K$c-$i") });
    sleep 0.7;
    my $rpid = $t->redis_pid;
    my $t_kill = time;
    kill 'KILL', $rpid;
    $t->stop_redis;
    sleep 0.8;
    start_tls_redis();
    my $t_up = time;
    my ($when) = $t->wait_passed('open', 'kb', 4);
    ok(defined $when && $when - $t_up <= 2, sprintf('kill: limiting resumed %.2fs after the restart (<= 2s)', defined $when ? $when - $t_up : 99));
    sleep 0.5;
    my @rec = $t->finish_load($load);
    ok(@rec > 50, 'kill: load ran (' . scalar(@rec) . ' requests)');
    my @errs = grep { $_->{err} ne '-' || !$_->{status} } @rec;
    is(scalar @errs, 0, 'kill: every request answered') or diag(join "\n", map { "$_->{loc} $_->{err}" } @errs[0 .. ($#errs < 9 ? $#errs : 9)]);
    my @slow = grep { $_->{loc} ne 'free' && $_->{el} > $TIMEOUT + $MARGIN } @rec;
    is(scalar @slow, 0, 'kill: no limited request slower than timeout + margin')
        or diag(join "\n", map { sprintf '%s %s %.3fs at +%.2fs', $_->{loc}, $_->{status}, $_->{el}, $_->{t0} - $t_kill } @slow[0 .. ($#slow < 9 ? $#slow : 9)]);
    my @ob = grep { $_->{loc} eq 'open' && $_->{status} != 200 } @rec;
    is(scalar @ob, 0, 'kill: fail open answered 200 throughout');
    my @during = grep { $_->{loc} eq 'closed' && $_->{t0} > $t_kill + 0.1 && $_->{t1} < $t_up } @rec;
    ok(@during && !(grep { $_->{status} != 503 } @during), 'kill: fail closed 503 during the outage (' . scalar(@during) . ')');
    ok(wait_all_connected(), 'both workers connected again');
    is(hammer('after-kill', $LIMIT + 3), "$LIMIT/3/0", 'kill: exact limit after the restart');
    my @w = $t->live_workers;
    is(scalar @w, $WORKERS, 'kill: workers alive');
    $t->throttle_ok('kill: redis problems logged at most once a second per worker');
}

# --- SIGSTOP under TLS ------------------------------------------------------------
{
    my ($up) = $t->wait_passed('open', 'sw', 3);
    ok(defined $up, 'stall: PASSED before');
    my $rpid = $t->redis_pid;
    kill 'STOP', $rpid;
    $STOPPED = $rpid;
    my $t_stop = time;
    my $load = $t->start_load(clients => 2, max_seconds => 8, max_requests => 2000, pause => 0.02,
        pick => sub { my ($c, $i) = @_; ((qw(open closed))[$c], "S$c-$i") });
    sleep 0.8;
    my @b = $t->burst(20, sub { my $i = shift; (($i % 2 ? '/closed/' : '/open/') . 'index.html', { 'X-Api-Key' => "SB$i" }) }, 5);
    is(join(' ', map { $_->{err} || $_->{status} } @b), join(' ', map { $_ % 2 ? 503 : 200 } 0 .. 19), 'stall burst: fail policy (open 200, closed 503)');
    my ($bmax) = sort { $b <=> $a } map { $_->{elapsed} } @b;
    cmp_ok($bmax, '<', $TIMEOUT + $MARGIN, sprintf('stall burst: slowest %.3fs < timeout + margin', $bmax));
    sleep 1.7;    # past 2 s of silence: the workers reconnect, the TLS handshake hangs
    my @rec = $t->finish_load($load);
    kill 'CONT', $rpid;
    $STOPPED = undef;
    note(sprintf 'redis stopped %.2fs, %d load requests', time - $t_stop, scalar @rec);
    my @bad = grep { $_->{err} ne '-' || $_->{status} != ($_->{loc} eq 'open' ? 200 : 503) || $_->{rs} ne 'ERROR' } @rec;
    is(scalar @bad, 0, 'stall: every request answered by the fail policy with ERROR')
        or diag(join ' ', map { "$_->{loc}:$_->{status}/$_->{rs}/$_->{err}" } @bad[0 .. ($#bad < 19 ? $#bad : 19)]);
    my ($max) = sort { $b <=> $a } map { $_->{el} } @rec;
    cmp_ok($max // 99, '<', $TIMEOUT + $MARGIN, sprintf('stall: slowest request %.3fs < timeout + margin', $max // 99));
    my ($when) = $t->wait_passed('open', 'sc', 4);
    ok(defined $when, 'after SIGCONT: PASSED');
    ok(wait_all_connected(), 'both workers connected again');
    is(hammer('after-stall', $LIMIT + 3), "$LIMIT/3/0", 'after SIGCONT: exact limit');
}

# --- 10 reloads under TLS load: no fd left behind -------------------------------------
{
    my @w0 = $t->live_workers;
    $t->req('open', "warm$_") for 1 .. 10;
    sleep 0.3;
    my ($fd0) = sort { $b <=> $a } map { $t->fd_count($_) // 0 } @w0;
    my $load = $t->start_load(clients => 2, max_seconds => 20, max_requests => 3000, pause => 0.01,
        pick => sub { my ($c, $i) = @_; ('open', "R$c-$i") });
    for (1 .. 10) { $t->reload; sleep 0.1 }
    sleep 0.4;
    my @rec = $t->finish_load($load);
    my @errs = grep { $_->{err} ne '-' || $_->{status} != 200 } @rec;
    ok(@rec > 20 && !@errs, 'reloads: every request answered 200 (' . scalar(@rec) . ')');
    my %rs;
    $rs{ $_->{rs} }++ for @rec;
    note('statuses during the reloads: ' . join(', ', map { "$_=$rs{$_}" } sort keys %rs));
    my $deadline = time + 10;
    my @w1;
    while (1) { @w1 = $t->live_workers; last if @w1 == $WORKERS || time > $deadline; sleep 0.1 }
    is(scalar @w1, $WORKERS, 'reloads: old workers exited');
    my ($when) = $t->wait_passed('open', 'rl', 3);
    ok(defined $when, 'reloads: PASSED after');
    $t->req('open', "warm2-$_") for 1 .. 10;
    $deadline = time + 5;
    my @c;
    while (1) { @c = $t->redis_clients; last if @c == $WORKERS || time > $deadline; sleep 0.1 }
    is(scalar @c, $WORKERS, 'reloads: redis back to one (TLS) connection per worker') or diag(join "\n", @c);
    sleep 0.3;
    for my $p (@w1) {
        my $n = $t->fd_count($p);
        ok(defined $n && $n <= $fd0 + 2, "reloads: worker $p has " . ($n // '?') . " fds, before $fd0 (+2 allowed)");
    }
    ok(wait_all_connected(), 'both workers connected again');
    is(hammer('after-reloads', $LIMIT + 3), "$LIMIT/3/0", 'reloads: exact limit after');
    $t->throttle_ok('reloads: redis problems logged at most once a second per worker');
}

$t->stop_nginx;
$t->stop_redis;
$t->final_checks;

done_testing;
