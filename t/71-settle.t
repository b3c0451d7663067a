#!/usr/bin/perl
# Settling after the response (issue 26): `ratelimit_settle zone=NAME VALUE
# [empty=keep|refund];`, against a stand-in LLM upstream (t/lib/TokenBackend.pm)
# that answers each request with a random token count.
#
# Expected (spec-26 section 2):
# - at the log phase of an admitted request VALUE is its real cost and
#   VALUE - reserved goes to the bucket of the reservation: after a run Redis
#   holds exactly the tokens of the admitted requests, whether the count comes
#   in a response header or (nginx >= 1.27.2, proxy_pass_trailers) in a
#   chunked trailer, streamed or buffered;
# - reserve mode (cost=$arg_max_tokens) passes the budget only by what
#   requests used beyond their reservations; pay-afterwards (cost=0) by at
#   most what the requests not yet settled used;
# - an empty VALUE (the upstream failed: 502, or sent no header): empty=refund
#   gives the reservation back, empty=keep (the default) keeps it; a VALUE that
#   is no whole number sends nothing and logs a line naming zone and value;
# - cost=0 and a settle of `map $status`: failed logins, 5 in 15 minutes,
#   block the 6th attempt, successes never count; $body_bytes_sent: bytes per
#   client;
# - a request settles once, through internal redirects (try_files,
#   error_page, rewrite) and subrequests (SSI, auth_request); a rejected,
#   failed-open, dry-run-rejected or peeked request settles nothing;
# - metrics: settles applied, units added and returned (section 3);
# - nginx -t fails with file:line when ratelimit_settle names a zone its
#   location does not apply, or has a bad parameter.
#
# Random token counts and reservations come from a seed printed at the start
# (RATELIMIT_SEED=N repeats a run).

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use IO::Socket::INET;
use IO::Select;
use RateLimitTest qw(hdr sleep_until_phase);
use TokenBackend;
use PromText;

RateLimitTest::require_module();

my $SEED = $ENV{RATELIMIT_SEED} // int(rand(1e6));
diag("random seed: $SEED (RATELIMIT_SEED=$SEED repeats this run)");
srand($SEED);

my ($NGINX_VERSION) = `${\ RateLimitTest::nginx_bin()} -v 2>&1` =~ m{nginx/(\d+\.\d+\.\d+)};
$NGINX_VERSION //= '0.0.0';
my $TRAILERS = sprintf('%03d%03d%03d', split /\./, $NGINX_VERSION) ge '001027002';

my $t = RateLimitTest->new(workers => 2);
$t->start_redis;
my $REDIS_PORT = $t->redis_port;
my $BYTES_SETTLED = 0;

# --- nginx -t ----------------------------------------------------------------------

sub conf_t {
    my ($server_level, $location) = @_;
    $t->write_conf(<<"EOF");
ratelimit_redis 127.0.0.1:$REDIS_PORT;
ratelimit_zone api   key=\$http_x_api_key limit=100 window=60s;
ratelimit_zone other key=\$http_x_api_key limit=100 window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    $server_level
    location /x/ {
        $location
        alias %%TMP%%/html/;
    }
}
EOF
    return $t->nginx_t;
}

for my $ok (['', 'ratelimit zone=api; ratelimit_settle zone=api $arg_v;'],
            ['', 'ratelimit zone=api cost=0; ratelimit_settle zone=api 7 empty=refund;'],
            ['', 'ratelimit zone=api; ratelimit_settle zone=api $body_bytes_sent empty=keep;'],
            ['', 'ratelimit zone=api; ratelimit zone=other; ratelimit_settle zone=api $arg_a; ratelimit_settle zone=other $arg_b;'],
            ['ratelimit zone=api; ratelimit_settle zone=api $arg_v;', ''],
            ['ratelimit zone=api;', 'ratelimit_settle zone=api $arg_v;'])
{
    my ($st, $out) = conf_t(@$ok);
    is($st, 0, "nginx -t accepts: @$ok") or diag($out);
}

for my $bad (['', 'ratelimit zone=api; ratelimit_settle zone=other $arg_v;', 'a zone the location does not apply'],
             ['', 'ratelimit_settle zone=api $arg_v;', 'a location without ratelimit'],
             ['', 'ratelimit zone=api; ratelimit_settle zone=nope $arg_v;', 'an unknown zone'],
             ['', 'ratelimit zone=api; ratelimit_settle zone=api;', 'no value'],
             ['', 'ratelimit zone=api; ratelimit_settle $arg_v;', 'no zone='],
             ['', 'ratelimit zone=api; ratelimit_settle zone= $arg_v;', 'an empty zone='],
             ['', 'ratelimit zone=api; ratelimit_settle zone=api $arg_v empty=maybe;', 'empty=maybe'],
             ['', 'ratelimit zone=api; ratelimit_settle zone=api $arg_v bogus=1;', 'an unknown parameter'],
             ['', 'ratelimit zone=api; ratelimit_settle zone=api $arg_v $arg_w;', 'two values'])
{
    my ($server_level, $location, $what) = @$bad;
    my ($st, $out) = conf_t($server_level, $location);
    my $line = $t->conf_line(qr/ratelimit_settle/);
    isnt($st, 0, "nginx -t refuses ratelimit_settle with $what");
    like($out, qr/\[emerg\].*nginx\.conf:$line\b/, "  [emerg] with the file and the settle's line ($line)")
        or diag($out);
}
{
    # Settles go with the zones they settle: a location with zones of its
    # own inherits none (see "inherited" below), so this is no error.
    my ($st, $out) = conf_t('ratelimit zone=api; ratelimit_settle zone=api $arg_v;', 'ratelimit zone=other;');
    is($st, 0, 'nginx -t accepts a server\'s settle above a location with zones of its own') or diag($out);
}

# --- the running server ---------------------------------------------------------------

my $BACKEND = $t->port('BACKEND');
TokenBackend::start($t, $BACKEND, seed => $SEED);

$t->write_html('big.bin', 'b' x 30000);
$t->write_html('small.bin', 's' x 10000);
$t->write_html('ssi/page.html',
    "<p>start</p>\n" . qq{<!--# include virtual="/lim/x.html" -->\n} x 3 . "<p>end</p>\n");

my $trailer_locations = !$TRAILERS ? '' : <<'EOF';
    location /tr/ {
        ratelimit zone=llm cost=$arg_max_tokens;
        ratelimit_settle zone=llm $upstream_trailer_x_usage_tokens;
        proxy_http_version 1.1;
        proxy_pass_trailers on;
        proxy_set_header Connection "te";
        proxy_set_header TE "trailers";
        proxy_pass http://tokens;
    }
    location /trs/ {
        ratelimit zone=llm cost=$arg_max_tokens;
        ratelimit_settle zone=llm $upstream_trailer_x_usage_tokens;
        proxy_http_version 1.1;
        proxy_pass_trailers on;
        proxy_set_header Connection "te";
        proxy_set_header TE "trailers";
        proxy_buffering off;
        proxy_pass http://tokens;
    }
EOF

$t->write_conf((<<"EOF" . <<'EOF' . <<'EOF') =~ s/^ *# TRAILER LOCATIONS\n/$trailer_locations/mr);
ratelimit_redis 127.0.0.1:$REDIS_PORT timeout=2s;
upstream tokens { server 127.0.0.1:$BACKEND; }
EOF
ratelimit_zone llm   key=$http_x_api_key limit=2000 window=60s;
ratelimit_zone ref   key=$http_x_api_key limit=1000 window=60s;
ratelimit_zone login key=$http_x_user limit=5 window=15m;
ratelimit_zone bytes key=$http_x_api_key limit=100000 window=1h;
ratelimit_zone once  key=$http_x_api_key limit=1000 window=60s;
ratelimit_zone rj    key=$http_x_api_key limit=10 window=60s;
ratelimit_zone gb    key=$http_x_api_key limit=100 window=60s;
ratelimit_zone t1    key=$http_x_api_key limit=1000 window=60s;
ratelimit_zone t2    key=$http_x_user limit=1000 window=60s;
ratelimit_zone huge  key=$http_x_api_key limit=1000 window=60s;
ratelimit_zone sb    key=$http_x_api_key limit=1000 window=4s bucket=1s;
ratelimit_zone fb    key=$http_x_api_key limit=1000 window=2s algorithm=fixed;

map $status $failed_login { 401 1; default 0; }

server {
    listen 127.0.0.1:%%PORT%% reuseport;
    root %%TMP%%/html;
    add_header X-RL-Status "$ratelimit_status" always;
    add_header X-Reserved "$arg_max_tokens" always;

    location /reserve/ {
        ratelimit zone=llm cost=$arg_max_tokens;
        ratelimit_settle zone=llm $upstream_http_x_usage_tokens;
        proxy_pass http://tokens;
    }
    location /pay/ {
        ratelimit zone=llm cost=0;
        ratelimit_settle zone=llm $upstream_http_x_usage_tokens;
        proxy_pass http://tokens;
    }

    location /refund/ {
        ratelimit zone=ref cost=100;
        ratelimit_settle zone=ref $upstream_http_x_usage_tokens empty=refund;
        proxy_pass http://tokens;
    }
    location /keep/ {
        ratelimit zone=ref cost=100;
        ratelimit_settle zone=ref $upstream_http_x_usage_tokens empty=keep;
        proxy_pass http://tokens;
    }
    location /keepdef/ {
        ratelimit zone=ref cost=100;
        ratelimit_settle zone=ref $upstream_http_x_usage_tokens;
        proxy_pass http://tokens;
    }

    location /login/ {
        ratelimit zone=login cost=0;
        ratelimit_settle zone=login $failed_login;
        proxy_pass http://tokens;
    }

    location /files/ {
        ratelimit zone=bytes cost=0;
        ratelimit_settle zone=bytes $body_bytes_sent;
        alias %%TMP%%/html/;
    }

    # counted once, settled once: cost 2, settled at 7
    location /tf/ {
        ratelimit zone=once cost=2; ratelimit_settle zone=once 7;
        try_files /nonexistent @named;
    }
    location @named {
        ratelimit zone=once cost=2; ratelimit_settle zone=once 7;
        rewrite ^ /a.html break;
    }
    location /tf2/ {
        ratelimit zone=once cost=2; ratelimit_settle zone=once 7;
        try_files /nonexistent /lim/b.html;
    }
    location /ep/ {
        ratelimit zone=once cost=2; ratelimit_settle zone=once 7;
        error_page 404 = /lim/a.html;
    }
    # error_page into a location without ratelimit: the reservation's
    # location settles it
    location /ep2/ {
        ratelimit zone=once cost=2; ratelimit_settle zone=once 7;
        error_page 404 = /plain/a.html;
    }
    location /plain/ { alias %%TMP%%/html/; }
    # subrequests of a request no zone counted: nothing counted, nothing settled
    location /ssiu/ { ssi on; alias %%TMP%%/html/ssi/; }
    location /aru/ { auth_request /auth; alias %%TMP%%/html/; }
    location /rw/ {
        ratelimit zone=once cost=2; ratelimit_settle zone=once 7;
        rewrite ^/rw/(.*)$ /lim/$1 last;
    }
    location /ssi/ {
        ratelimit zone=once cost=2; ratelimit_settle zone=once 7;
        ssi on;
    }
    location /ar/ {
        ratelimit zone=once cost=2; ratelimit_settle zone=once 7;
        auth_request /auth;
        alias %%TMP%%/html/;
    }
    location = /auth {
        ratelimit zone=once cost=2; ratelimit_settle zone=once 7;
        proxy_pass http://tokens/auth;
        proxy_pass_request_body off;
        proxy_set_header Content-Length "";
    }
    location /u/ {
        try_files /nonexistent /lim/a.html;
    }
    location /lim/ {
        ratelimit zone=once cost=2; ratelimit_settle zone=once 7;
        alias %%TMP%%/html/;
    }

    # what settles nothing
    location /rj/ {
        ratelimit zone=rj cost=5; ratelimit_settle zone=rj 9;
        ratelimit_peek_header X-Peek;
        error_page 429 /too.html;
        alias %%TMP%%/html/;
    }
    location /rjv/ {
        ratelimit zone=rj cost=$arg_cost; ratelimit_settle zone=rj 9;
        alias %%TMP%%/html/;
    }
    location /rjd/ {
        ratelimit zone=rj dry_run cost=5; ratelimit_settle zone=rj 9;
        alias %%TMP%%/html/;
    }

    # two zones, two settles; a settle of 2^53
    location /two/ {
        ratelimit zone=t1 cost=5; ratelimit zone=t2 cost=7;
        ratelimit_settle zone=t1 $upstream_http_x_usage_tokens;
        ratelimit_settle zone=t2 1;
        proxy_pass http://tokens;
    }
    location /huge/ {
        ratelimit zone=huge cost=100;
        ratelimit_settle zone=huge $upstream_http_x_usage_tokens;
        proxy_pass http://tokens;
    }

    # settles that give units back; the bucket of the reservation
    location /gb/ {
        ratelimit zone=gb cost=$arg_max_tokens;
        ratelimit_settle zone=gb $upstream_http_x_usage_tokens;
        proxy_pass http://tokens;
    }
    location /sb/ {
        ratelimit zone=sb cost=$arg_max_tokens;
        ratelimit_settle zone=sb $upstream_http_x_usage_tokens;
        proxy_pass http://tokens;
    }
    location /fb/ {
        ratelimit zone=fb cost=$arg_max_tokens;
        ratelimit_settle zone=fb $upstream_http_x_usage_tokens;
        proxy_pass http://tokens;
    }

    location = /metrics { ratelimit_metrics; }
    # TRAILER LOCATIONS
}

# inherited: the server's zone and settle, or a location's own zones and no settle
server {
    listen 127.0.0.1:%%PORT2%%;
    ratelimit zone=once cost=2;
    ratelimit_settle zone=once 7;
    location /inh/ { alias %%TMP%%/html/; }
    location /own/ { ratelimit zone=once cost=2; alias %%TMP%%/html/; }
EOF
}
EOF
$t->write_html('too.html', "slow down\n");
{
    my ($st, $out) = $t->nginx_t;
    is($st, 0, 'the test configuration passes nginx -t') or diag($out);
}
$t->start_nginx;

sub get {
    my ($path, %h) = @_;
    return $t->get($path, \%h);
}

sub st { my $r = shift; $r->{status} . '/' . (hdr($r, 'X-RL-Status') // '-') }

sub redis_t { $t->redis_window_count($_[0]) // 0 }

sub metric { PromText::value(PromText::scrape($t), @_) }

# Waits (at most $timeout s) until Redis's t of $key is $want; its value then.
sub wait_t {
    my ($key, $want, $timeout) = @_;
    RateLimitTest::wait_until(sub { redis_t($key) == $want }, $timeout // 3);
    return redis_t($key);
}

# Waits until zone $zone has $want settles applied; the number then.
sub wait_applied {
    my ($zone, $want, $timeout) = @_;
    my $n;
    RateLimitTest::wait_until(sub {
        $n = metric('nginx_ratelimit_settles_total', zone => $zone, outcome => 'applied');
        $n >= $want;
    }, $timeout // 3);
    return $n;
}

# A GET in a forked child; collect() gives its "status tokens" when done.
sub async_get {
    my ($path, $key) = @_;
    my $file = $t->tmp . '/async.' . int(rand(1e9));
    my $pid = $t->start_child('client', sub {
        my $r = $t->get($path, { 'X-Api-Key' => $key }, timeout => 10);
        RateLimitTest::_write_file($file, "$r->{status} " . (hdr($r, 'X-Usage-Tokens') // '-'));
    });
    return [ $pid, $file ];
}

sub collect {
    my ($a) = @_;
    waitpid($a->[0], 0);
    delete $RateLimitTest::Process::CHILDREN{ $a->[0] };
    return RateLimitTest::_read_file($a->[1]);
}

# One keep-alive connection (one worker): $send->($request_text) answers
# { status, headers, content }.
sub keep_conn {
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t->port('PORT'), Proto => 'tcp')
        or die "connect: $!";
    binmode $s;
    my $buf = '';
    return sub {
        my ($path, %h) = @_;
        print {$s} "GET $path HTTP/1.1\r\nHost: localhost\r\n" . join('', map { "$_: $h{$_}\r\n" } sort keys %h) . "\r\n";
        my $sel = IO::Select->new($s);
        my $i;
        while (($i = index($buf, "\r\n\r\n")) < 0) {
            $sel->can_read(5) && sysread($s, $buf, 65536, length $buf) or return { status => 0, headers => {} };
        }
        my ($line, @lines) = split /\r\n/, substr($buf, 0, $i);
        substr($buf, 0, $i + 4, '');
        my %hd = map { /^([^:]+):\s*(.*)$/ ? (lc $1, $2) : () } @lines;
        my $len = $hd{'content-length'} // 0;
        while (length($buf) < $len) { $sel->can_read(5) && sysread($s, $buf, 65536, length $buf) or last }
        my $content = substr($buf, 0, $len, '');
        return { status => ($line =~ m{^HTTP/\S+ (\d+)})[0], headers => \%hd, content => $content };
    };
}

# --- an LLM budget, reserve mode: cost=$arg_max_tokens, settle the real use ----------

{
    my $N = 2000;
    my ($clients, $per) = (6, 15);
    my @plan = map { [ map { 20 + int(rand(131)) } 1 .. $per ] } 1 .. $clients;
    my @res = $t->parallel_get(clients => $clients, requests => $clients * $per, requests_for => sub {
        my ($c, $i) = @_;
        my $max = $plan[$c][$i];
        my $hi = int($max * 1.4);
        return ("/reserve/chat?max_tokens=$max&lo=0&hi=$hi&hold=40", { 'X-Api-Key' => 'res-1' });
    });
    is(scalar @res, $clients * $per, 'reserve: ' . $clients * $per . ' responses');
    my %by;
    $by{ $_->{status} . '/' . ($_->{headers}{'x-rl-status'} // '-') }++ for @res;
    my @odd = grep { $_ ne '200/PASSED' && $_ ne '429/REJECTED' } sort keys %by;
    is("@odd", '', 'reserve: every answer 200 PASSED or 429 REJECTED') or diag(explain \%by);
    my @ok = grep { $_->{status} == 200 } @res;
    my ($used, $beyond, $reserved, $changed) = (0, 0, 0, 0);
    for (@ok) {
        my ($v, $r) = ($_->{headers}{'x-usage-tokens'}, $_->{headers}{'x-reserved'});
        $used += $v;
        $reserved += $r;
        $beyond += $v - $r if $v > $r;
        $changed++ if $v != $r;
    }
    note(scalar(@ok) . " admitted, reserved $reserved, used $used, beyond reservations $beyond");
    is(wait_t('rl:llm:res-1', $used), $used, "reserve: Redis holds exactly the tokens used by the admitted requests ($used)");
    ok($used <= $N + $beyond, "reserve: the budget ($N) passed only by what was used beyond the reservations ($used <= $N + $beyond)");
    is(wait_applied('llm', $changed), $changed, "reserve: a settle applied for each of the $changed admitted requests whose use differed");
}

# --- pay afterwards: cost=0, the settle adds all -----------------------------------------

{
    my $N = 2000;
    my $clients = 6;
    my @res = $t->parallel_get(clients => $clients, requests => 72, requests_for => sub {
        return ('/pay/chat?lo=50&hi=300&hold=150', { 'X-Api-Key' => 'pay-1' });
    });
    my @ok = grep { $_->{status} == 200 } @res;
    my @other = grep { $_->{status} != 200 && $_->{status} != 429 } @res;
    is(scalar @other, 0, 'pay afterwards: every answer 200 or 429');
    my $used = 0;
    $used += $_->{headers}{'x-usage-tokens'} for @ok;
    my @v = sort { $b <=> $a } map { $_->{headers}{'x-usage-tokens'} } @ok;
    # At the last admission the count was under N; what was not in it then
    # was used by requests in flight: each client's current one and at most
    # its previous one, whose settle may still have been on its way.
    my $top = 0;
    $top += $_ for grep { defined } @v[0 .. 2 * $clients - 1];
    note(scalar(@ok) . " admitted, used $used, the " . 2 * $clients . " largest uses $top");
    is(wait_t('rl:llm:pay-1', $used), $used, "pay afterwards: Redis holds exactly the tokens used ($used)");
    ok($used >= $N, "pay afterwards: the budget was used up ($used >= $N)");
    ok($used <= $N - 1 + $top, "pay afterwards: passed by at most what the requests in flight used ($used <= $N - 1 + $top)");
    ok(!(grep { ($_->{headers}{'x-ratelimit-remaining'} // 0) < 1 } @ok),
       'pay afterwards: requests admitted only while under the budget (remaining >= 1)');
    my $rej = grep { $_->{status} == 429 } @res;
    ok($rej > 0, "pay afterwards: rejected once the budget was used ($rej)");
}

# --- the count in a chunked trailer, streamed ----------------------------------------------

SKIP: {
    skip "nginx $NGINX_VERSION: the proxy module reads an upstream's trailers only from 1.27.2"
        . ' (proxy_pass_trailers), so $upstream_trailer_x_usage_tokens stays empty', 6 unless $TRAILERS;
    for my $loc ('tr', 'trs') {
        my $key = "$loc-1";
        my ($used, @st) = (0);
        for my $i (1 .. 6) {
            my $max = 50 + int(rand(100));
            my $t0 = time;
            my $r = get("/$loc/chat?max_tokens=$max&lo=10&hi=200&hold=300&mode=trailer", 'X-Api-Key' => $key);
            push @st, st($r);
            my ($v) = ($r->{content} // '') =~ /tokens=(\d+)/;
            $used += $v // 0;
        }
        is("@st", join(' ', ('200/PASSED') x 6), "trailer ($loc): six admitted");
        is(wait_t("rl:llm:$key", $used), $used, "trailer ($loc" . ($loc eq 'trs' ? ', unbuffered' : '')
            . "): Redis holds exactly the tokens of the trailers ($used)");
    }
    my $r = get('/tr/chat?max_tokens=77&hold=30&mode=fail', 'X-Api-Key' => 'tr-fail');
    is($r->{status}, 502, 'trailer: an upstream that fails: 502');
    sleep 0.3;
    is(redis_t('rl:llm:tr-fail'), 77, 'trailer: empty, empty=keep: the reservation kept');
}

# --- empty=refund, empty=keep, invalid values ------------------------------------------------

{
    my $before_ret = metric('nginx_ratelimit_units_total', zone => 'ref', event => 'settle_returned');
    my $r = get('/refund/chat?mode=fail&hold=20', 'X-Api-Key' => 'rf');
    is($r->{status}, 502, 'refund: the upstream fails: 502');
    is(wait_t('rl:ref:rf', 0), 0, 'refund: empty=refund gave the 100 reserved back');
    $r = get('/refund/chat?lo=1&hi=99', 'X-Api-Key' => 'rf');
    my $v = hdr($r, 'X-Usage-Tokens');
    is(wait_t('rl:ref:rf', $v), $v, "refund: a request that used $v counts $v");
    $r = get('/refund/chat?mode=none', 'X-Api-Key' => 'rf');
    is($r->{status}, 200, 'refund: a 200 without the header');
    is(wait_t('rl:ref:rf', $v), $v, 'refund: its reservation given back too');

    is(get('/keep/chat?mode=fail&hold=20', 'X-Api-Key' => 'kp')->{status}, 502, 'keep: the upstream fails: 502');
    is(get('/keepdef/chat?mode=fail&hold=20', 'X-Api-Key' => 'kd')->{status}, 502, 'default: the upstream fails: 502');

    sleep_until_phase(1, 0.05);
    my @bad = $t->raw_exchange(map {
        "GET /keep/chat?mode=value&val=$_ HTTP/1.1\r\nHost: localhost\r\nX-Api-Key: bad-$_\r\n\r\n"
    } 'lots', 'lots', 'lots');
    is(join(' ', map { $_->{status} } @bad), '200 200 200', 'invalid value "lots": answered 200');
    my $line = qr/\[error\][^\n]*ratelimit: [^\n]*(?:"lots"[^\n]*zone "ref"|zone "ref"[^\n]*"lots")/;
    is($t->wait_log($line, 1), 1, 'invalid value: one [error] line naming zone and value for three');
    $t->raw_exchange("GET /refund/chat?mode=value&val=-5 HTTP/1.1\r\nHost: localhost\r\nX-Api-Key: neg\r\n\r\n");
    $t->raw_exchange("GET /refund/chat?mode=value&val=9007199254740993 HTTP/1.1\r\nHost: localhost\r\nX-Api-Key: huge\r\n\r\n");

    is(wait_applied('ref', 3), 3, 'refund: three settles applied (two refunds, one use)');
    sleep 0.5;
    is(metric('nginx_ratelimit_settles_total', zone => 'ref', outcome => 'applied'), 3,
       'keep and invalid values: no settle sent');
    is(redis_t('rl:ref:kp') . ' ' . redis_t('rl:ref:kd'), '100 100', 'empty=keep and the default keep the 100 reserved');
    is(redis_t('rl:ref:bad-lots'), 300, 'invalid "lots": the reservations kept, nothing sent');
    is(redis_t('rl:ref:neg') . ' ' . redis_t('rl:ref:huge'), '100 100',
       'invalid "-5" (empty=refund) and 2^53+1: nothing sent, not refunded');
    is(metric('nginx_ratelimit_units_total', zone => 'ref', event => 'settle_returned') - $before_ret,
       100 + (100 - $v) + 100, 'metrics: units returned by settles, 100 + ' . (100 - $v) . ' + 100');
    is(metric('nginx_ratelimit_units_total', zone => 'ref', event => 'settle_added'), 0, 'metrics: no units added');
}

# --- failed logins: cost=0, settle map $status ------------------------------------------------

{
    my $login = sub { my ($user, $status) = @_; get("/login/?status=$status&mode=none", 'X-User' => $user) };
    my @r = map { $login->('alice', 200) } 1 .. 3;
    is(join(' ', map { $_->{status} } @r), '200 200 200', 'logins: three successes');
    @r = map { $login->('alice', 401) } 1 .. 5;
    is(join(' ', map { $_->{status} } @r), '401 401 401 401 401', 'logins: five failures answered 401');
    is(wait_t('rl:login:alice', 5), 5, 'logins: Redis counts the five failures only');
    my $r = $login->('alice', 200);
    is(st($r), '429/REJECTED', 'logins: the 6th attempt (right password) is blocked');
    is(st($login->('alice', 401)), '429/REJECTED', 'logins: and a 7th (wrong) one');
    sleep 0.3;
    is(redis_t('rl:login:alice'), 5, 'logins: blocked attempts count nothing');
    my $ttl = $t->redis('PTTL', 'rl:login:alice');
    ok($ttl > 14 * 60_000 && $ttl <= 15 * 60_000 + 15_000, "logins: the failures expire with the 15-minute window (PTTL $ttl ms)");

    @r = map { $login->('bob', 200) } 1 .. 10;
    is(join(' ', map { $_->{status} } @r), join(' ', ('200') x 10), 'logins: ten successes for bob');
    sleep 0.3;
    is(redis_t('rl:login:bob'), 0, 'logins: successes never count');
    $login->('bob', 401);
    is(wait_t('rl:login:bob', 1), 1, 'logins: one failure counts 1');
    @r = map { $login->('bob', 200) } 1 .. 6;
    is(join(' ', map { $_->{status} } @r), join(' ', ('200') x 6), 'logins: successes still pass');
}

# --- bytes per client: cost=0, settle $body_bytes_sent -------------------------------------------

{
    my @r = map { get("/files/$_", 'X-Api-Key' => 'cl1') } 'big.bin', 'big.bin', 'small.bin';
    is(join(' ', map { $_->{status} } @r), '200 200 200', 'bytes: three files served');
    is(wait_t('rl:bytes:cl1', 70000), 70000, 'bytes: Redis counts 70000 bytes sent');
    my $r = get('/files/big.bin', 'X-Api-Key' => 'cl1');
    is($r->{status}, 200, 'bytes: admitted at 70000 of 100000');
    is(wait_t('rl:bytes:cl1', 100000), 100000, 'bytes: 100000 bytes counted');
    $r = get('/files/small.bin', 'X-Api-Key' => 'cl1');
    is($r->{status}, 429, 'bytes: the budget used: rejected');
    sleep 0.3;
    is(redis_t('rl:bytes:cl1'), 100000, 'bytes: the rejection\'s own bytes not counted');
    $r = get('/files/missing.bin', 'X-Api-Key' => 'cl2');
    is($r->{status}, 404, 'bytes: a 404');
    my $len = length $r->{content};
    is(wait_t('rl:bytes:cl2', $len), $len, "bytes: the 404's body counted ($len)");
    $BYTES_SETTLED = 100000 + $len;
}

# --- settled once through redirects and subrequests ----------------------------------------------

{
    my $before = metric('nginx_ratelimit_settles_total', zone => 'once', outcome => 'applied');
    my @cases = (['/tf/x', 'tf'], ['/tf2/x', 'tf2'], ['/ep/missing.html', 'ep'], ['/rw/a.html', 'rw'],
                 ['/ssi/page.html', 'ssi'], ['/ar/index.html', 'ar'], ['/u/x', 'u'], ['/lim/a.html', 'lim'],
                 ['/ep2/missing.html', 'ep2']);
    for my $c (@cases) {
        my $r = get($c->[0], 'X-Api-Key' => "once-$c->[1]");
        is($r->{status}, 200, "once: $c->[0] answered 200");
    }
    my $n = @cases;
    is(wait_applied('once', $before + $n) - $before, $n, "once: $n settles applied, one a request");
    sleep 0.5;
    is(metric('nginx_ratelimit_settles_total', zone => 'once', outcome => 'applied') - $before, $n,
       'once: and no more');
    for my $c (@cases) {
        is(redis_t("rl:once:once-$c->[1]"), 7, "once: $c->[0]: reserved 2, settled once at 7");
    }
    my @u = (get('/ssiu/page.html', 'X-Api-Key' => 'once-ssiu'), get('/aru/index.html', 'X-Api-Key' => 'once-aru'));
    is(join(' ', map { $_->{status} } @u), '200 200', 'once: SSI and auth_request from a location without ratelimit');
    sleep 0.3;
    is($t->redis('EXISTS', 'rl:once:once-ssiu', 'rl:once:once-aru'), 0, '  their subrequests counted and settled nothing');
}

{
    my $p2 = $t->port('PORT2');
    is($t->get('/inh/a.html', { 'X-Api-Key' => 'inh' }, port => $p2)->{status}, 200, 'inherited: served');
    is(wait_t('rl:once:inh', 7), 7, 'inherited: a location without ratelimit of its own takes the server\'s zone and settle (7)');
    is($t->get('/own/a.html', { 'X-Api-Key' => 'own' }, port => $p2)->{status}, 200, 'own zones: served');
    sleep 0.5;
    is(redis_t('rl:once:own'), 2, 'own zones: a location with zones of its own inherits no settle (2)');
}

# --- two settles on a request; no subject; the largest value ------------------------------------

{
    my $r = get('/two/chat?lo=20&hi=40', 'X-Api-Key' => 'two', 'X-User' => 'two-u');
    my $v = hdr($r, 'X-Usage-Tokens');
    is(st($r), '200/PASSED', 'two zones: admitted');
    is(wait_t('rl:t1:two', $v) . ' ' . wait_t('rl:t2:two-u', 1), "$v 1", "two zones: each settled by its own value ($v, 1)");
    $r = get('/two/chat?lo=20&hi=40', 'X-User' => 'two-v');
    $v = hdr($r, 'X-Usage-Tokens');
    is(st($r), '200/PASSED', 'an empty key in t1: not limited there');
    is(wait_t('rl:t2:two-v', 1), 1, '  t2 settled');
    is(join(' ', $t->redis_keys('rl:t1:*')), 'rl:t1:two', '  t1 settled nothing for it');

    $r = get('/huge/chat?mode=value&val=9007199254740992', 'X-Api-Key' => 'max');
    is($r->{status}, 200, 'a value of 2^53: answered');
    is(wait_t('rl:huge:max', '9007199254740992'), '9007199254740992', '  Redis counts 2^53 exactly');
    is(st(get('/huge/chat', 'X-Api-Key' => 'max')), '429/REJECTED', '  the next request rejected');
}

# --- settles that give units back: no rejection from memory --------------------------------

{
    # 100 reserved for a long request that uses 10; meanwhile 50 more are
    # rejected on a connection to one worker; once the 90 are back, 50 fit,
    # on that same connection.
    my $long = async_get('/gb/chat?max_tokens=100&lo=10&hi=10&hold=800', 'gb1');
    ok(RateLimitTest::wait_until(sub { redis_t('rl:gb:gb1') == 100 }, 3), 'given back: 100 reserved by a long request');
    my $conn = keep_conn();
    my $r = $conn->('/gb/chat?max_tokens=50&lo=5&hi=5', 'X-Api-Key' => 'gb1');
    is($r->{status} . '/' . ($r->{headers}{'x-rl-status'} // '-'), '429/REJECTED', 'given back: 50 more rejected meanwhile');
    is(collect($long), '200 10', 'given back: the long request used 10');
    is(wait_t('rl:gb:gb1', 10), 10, 'given back: its settle gave 90 back');
    $r = $conn->('/gb/chat?max_tokens=50&lo=5&hi=5', 'X-Api-Key' => 'gb1');
    is($r->{status} . '/' . ($r->{headers}{'x-rl-status'} // '-'), '200/PASSED',
       'given back: the same worker admits 50 now (its memory of the rejection not used)');
    is(wait_t('rl:gb:gb1', 15), 15, 'given back: 10 + 5 used');
}

# --- the bucket the reservation went to ------------------------------------------------------

{
    # Sliding, 4 buckets of 1 s: a settle 1.3 s later goes to the bucket of
    # the reservation, not the current one; one 4.5 s later finds that
    # bucket out of the window and takes nothing.  Fixed, windows of 2 s: a
    # settle in the window of the reservation counts, one in the next
    # window takes nothing.
    my $before = metric('nginx_ratelimit_units_total', zone => 'sb', event => 'settle_added');
    sleep_until_phase(2, 0.1);
    my $in   = async_get('/sb/chat?max_tokens=10&lo=50&hi=50&hold=1300', 'sb1');
    my $out  = async_get('/sb/chat?max_tokens=10&lo=50&hi=50&hold=4500', 'sb2');
    my $fin  = async_get('/fb/chat?max_tokens=10&lo=50&hi=50&hold=300', 'fb1');
    my $fout = async_get('/fb/chat?max_tokens=10&lo=50&hi=50&hold=2200', 'fb2');
    RateLimitTest::wait_until(sub { redis_t('rl:sb:sb1') == 10 }, 1);
    my %h = %{ $t->redis_window('rl:sb:sb1') };
    my @b = grep { /^\d+$/ } keys %h;
    is(scalar @b, 1, 'bucket: the reservation in one bucket') or diag(explain \%h);
    my $b = $b[0] // -1;
    is(collect($in), '200 50', 'bucket: a request using 50 after 1.3 s');
    is(wait_t('rl:sb:sb1', 50), 50, 'bucket: its settle counted (t 50)');
    %h = %{ $t->redis_window('rl:sb:sb1') };
    is(join(',', map { "$_=$h{$_}" } sort grep { /^\d+$/ && $h{$_} } keys %h), "$b=50",
       'bucket: the 40 went to the bucket of the reservation, not the current one');
    is(collect($fin), '200 50', 'fixed: a request using 50 within its window');
    is(wait_t('rl:fb:fb1', 50), 50, 'fixed: its settle counted');
    is(collect($fout), '200 50', 'fixed: a request answered in the next window');
    is(collect($out), '200 50', 'bucket: a request answered after 4.5 s');
    sleep 0.5;
    is($t->redis('EXISTS', 'rl:sb:sb2') . ' ' . $t->redis('EXISTS', 'rl:fb:fb2'), '0 0',
       'a settle whose bucket or window has passed takes nothing, makes no key');
    is(metric('nginx_ratelimit_units_total', zone => 'sb', event => 'settle_added') - $before, 40,
       'metrics: units added in zone sb: 40, none by the late settle');
    is(metric('nginx_ratelimit_units_total', zone => 'fb', event => 'settle_added'), 40,
       'metrics: units added in zone fb: 40, none by the late settle');
}

# --- what settles nothing ---------------------------------------------------------------------------

{
    is(st(get('/rj/index.html', 'X-Api-Key' => 'r1')), '200/PASSED', 'rejected: the first request admitted (5)');
    is(wait_t('rl:rj:r1', 9), 9, 'rejected: settled at 9');
    my @r = map { get('/rj/index.html', 'X-Api-Key' => 'r1') } 1 .. 3;
    is(join(' ', map { st($_) } @r), '429/REJECTED 429/REJECTED 429/REJECTED', 'rejected: 9 + 5 > 10');
    is($r[0]{content}, "slow down\n", 'rejected: its error_page served');
    my $r = get('/rjd/index.html', 'X-Api-Key' => 'r1');
    is(st($r), '200/REJECTED_DRY_RUN', 'dry run: over, let through');
    $r = get('/rj/index.html', 'X-Api-Key' => 'r1', 'X-Peek' => '1');
    is($r->{status}, 200, 'peek: answered');
    like($r->{content}, qr/"used":\s*9\b/, 'peek: sees 9 used');
    $r = get('/rjv/index.html?cost=abc', 'X-Api-Key' => 'r2');
    is(st($r), '400/INVALID', 'an invalid cost: refused with 400');
    sleep 0.5;
    is(redis_t('rl:rj:r1'), 9, 'rejected, dry-run rejected and peeked requests settled nothing');
    is($t->redis('EXISTS', 'rl:rj:r2'), 0, 'a refused request settled nothing');
    is(metric('nginx_ratelimit_settles_total', zone => 'rj', outcome => 'applied'), 1, 'metrics: one settle in zone rj');
}

# --- metrics: every settle accounted for -------------------------------------------------------------

{
    my $m = PromText::scrape($t);
    for my $zone (qw(llm ref login bytes once rj)) {
        my @lost = map { PromText::value($m, 'nginx_ratelimit_settles_total', zone => $zone, outcome => $_) }
            qw(dropped unknown failed);
        is("@lost", '0 0 0', "metrics: zone $zone lost no settle (dropped, unknown, failed)");
    }
    ok(PromText::value($m, 'nginx_ratelimit_units_total', zone => 'llm', event => 'admitted') > 0,
       'metrics: units admitted in zone llm');
    ok(PromText::value($m, 'nginx_ratelimit_units_total', zone => 'llm', event => 'rejected') > 0,
       'metrics: units rejected in zone llm');
    is(PromText::value($m, 'nginx_ratelimit_units_total', zone => 'bytes', event => 'settle_added'), $BYTES_SETTLED,
       "metrics: units added by settles in zone bytes, the bytes sent ($BYTES_SETTLED)");
    is(PromText::value($m, 'nginx_ratelimit_units_total', zone => 'bytes', event => 'admitted'), 0,
       'metrics: no units admitted at cost 0');
    is(PromText::value($m, 'nginx_ratelimit_settles_total', zone => 'once', outcome => 'applied'), 10,
       'metrics: zone once, 10 settles applied');
    is(PromText::value($m, 'nginx_ratelimit_units_total', zone => 'once', event => 'admitted') . ' '
       . PromText::value($m, 'nginx_ratelimit_units_total', zone => 'once', event => 'settle_added'), '22 50',
       'metrics: zone once, 11 x 2 units admitted, 10 x 5 added by settles');
}

$t->stop_nginx;
$t->no_alerts;

done_testing;
