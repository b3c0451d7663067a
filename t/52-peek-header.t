#!/usr/bin/perl
# Peek header: a request to a limited location carrying the configured header
# (ratelimit_peek_header) is answered with the JSON report of its own zones
# and keys, is not counted, and never reaches the content handler/upstream.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use JSON::PP ();
use RateLimitTest qw(hdr);
use FaultTest ();
use IO::Socket::INET;
use IO::Select;

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 1);

my $ZONES = <<'EOF';
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=1s;
ratelimit_zone pk  key=$http_x_api_key limit=3 window=60s;
ratelimit_zone pk2 key=$http_x_api_key limit=5 window=60s;
log_format hits '$request_uri';
EOF

my $UPSTREAM = <<'EOF';
server {
    listen 127.0.0.1:%%PORT2%%;
    access_log %%TMP%%/upstream.log hits;
    location / { root %%TMP%%/html; }
}
EOF

# --- configuration contexts -------------------------------------------------------

for my $ctx (['http', "ratelimit_peek_header X-A;\nserver { listen 127.0.0.1:%%PORT%%; location / { ratelimit zone=pk; root %%TMP%%/html; } }\n"],
             ['server', "server { listen 127.0.0.1:%%PORT%%; ratelimit_peek_header X-A; location / { ratelimit zone=pk; root %%TMP%%/html; } }\n"],
             ['location', "server { listen 127.0.0.1:%%PORT%%; location / { ratelimit zone=pk; ratelimit_peek_header X-A; root %%TMP%%/html; } }\n"])
{
    $t->write_conf($ZONES . $ctx->[1]);
    my ($st, $out) = $t->nginx_t;
    is($st, 0, "ratelimit_peek_header allowed in $ctx->[0] context") or diag($out);
}

# --- running server -------------------------------------------------------------------

$t->start_redis;
$t->write_conf($ZONES . <<'EOF' . $UPSTREAM);
ratelimit_peek_header X-Http-Peek;

server {
    listen 127.0.0.1:%%PORT%%;
    ratelimit_peek_header X-RateLimit-Status;

    location /p/   { ratelimit zone=pk; proxy_pass http://127.0.0.1:%%PORT2%%/; }
    location /two/ { ratelimit zone=pk; ratelimit zone=pk2; proxy_pass http://127.0.0.1:%%PORT2%%/; }
    location /s/   { ratelimit zone=pk; alias %%TMP%%/html/; }
}

server {
    listen 127.0.0.1:%%PORT3%%;

    # inherits X-Http-Peek from http{}
    location /p/  { ratelimit zone=pk; proxy_pass http://127.0.0.1:%%PORT2%%/; }
    location /lp/ { ratelimit zone=pk; ratelimit_peek_header X-Peek; proxy_pass http://127.0.0.1:%%PORT2%%/; }
}
EOF
$t->start_nginx;

my $JSON = JSON::PP->new->utf8;

# GET with headers given as "Name: value" lines over a raw socket, so that
# the exact header name case and empty values are sent as written.
# Returns { status, headers => {lc name => value}, content }.
sub raw_get {
    my ($path, %o) = @_;
    my $r = FaultTest::raw_get($o{port} // $t->port('PORT'), $path, $o{headers} // []);
    die "GET $path: $r->{err}\n" if $r->{err};
    $r->{content} = $r->{body};
    return $r;
}

sub req {
    my ($loc, $key, %o) = @_;
    my @h = ("X-Api-Key: $key", @{ $o{headers} // [] });
    return raw_get("/$loc/index.html", headers => \@h, port => $o{port});
}

sub peek_with {
    my ($loc, $key, $line, %o) = @_;
    return req($loc, $key, headers => [$line], %o);
}

sub peek { my ($loc, $key, %o) = @_; return peek_with($loc, $key, 'X-RateLimit-Status: 1', %o) }

sub json { my ($r) = @_; return eval { $JSON->decode($r->{content}) } }

sub hits {
    my $c = RateLimitTest::_read_file($t->tmp . '/upstream.log');
    my $n = () = $c =~ /\n/g;
    return $n;
}

# waits (up to 2 s) until the upstream has logged at least $n hits
sub wait_hits {
    my ($n) = @_;
    my $deadline = time + 2;
    sleep 0.02 while hits() < $n && time < $deadline;
    sleep 0.2;    # and a little more, so that extra hits would show up
    return hits();
}

# checks a peek answer: 200, JSON array, objects as given (zone, used, ...)
sub check_peek {
    my ($what, $r, @exp) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is($r->{status}, 200, "$what: 200");
    like($r->{headers}{'content-type'} // '', qr{^application/json\b}, "$what: Content-Type application/json");
    unlike($r->{content}, qr/index page/, "$what: not the page");
    my $j = json($r);
    ok(ref $j eq 'ARRAY', "$what: JSON array") or diag($r->{content});
    is(ref $j eq 'ARRAY' ? scalar @$j : -1, scalar @exp, "$what: " . scalar(@exp) . ' object(s)');
    for my $i (0 .. $#exp) {
        my $o = ref $j eq 'ARRAY' ? $j->[$i] : undef;
        my $e = $exp[$i];
        for my $f (sort keys %$e) {
            if (ref $e->{$f} eq 'CODE') {
                ok($o && $e->{$f}->($o->{$f}), "$what: [$i] $f (" . ($o->{$f} // 'undef') . ')');
            } else {
                is($o && $o->{$f}, $e->{$f}, "$what: [$i] $f = $e->{$f}");
            }
        }
    }
    return $j;
}

sub check_served {
    my ($what, $r) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is($r->{status}, 200, "$what: 200");
    is($r->{content}, "index page\n", "$what: the page (served normally)");
}

# warm up the connection to redis
req('p', 'warmup');
my $h0 = wait_hits(1);
is($h0, 1, 'upstream access log counts hits');

# --- a peek on a fresh subject ----------------------------------------------------------

{
    my $r = peek('p', 'f1');
    check_peek('peek f1', $r, { zone => 'pk', key => 'f1', limit => 3, used => 0, remaining => 3, window => 60,
        retry_after => 0, reset => sub { $_[0] =~ /^\d+$/ && abs($_[0] - time) <= 2 } });
    is(wait_hits(1), 1, 'peek f1: no upstream hit');
    # the peek is an ordinary, logged request (the access log uses the
    # $ratelimit_* variables); the worker survives it
    my @e = $t->access_entries_for(sub { $_->{uri} eq '/p/index.html' && $_->{status} == 200 }, 2);
    is(scalar @e, 2, 'peek f1: logged in the access log like any request');
    is($t->count_log(qr/exited on signal/), 0, 'peek f1: no worker crashed')
        or diag(join "\n", grep { /exited on signal/ } split /\n/, $t->error_log);
}

# --- peeks do not count: 5 peeks, then the full limit -------------------------------------

{
    my $base = hits();
    for my $i (1 .. 5) {
        check_peek("peek f2 #$i", peek('p', 'f2'), { zone => 'pk', key => 'f2', used => 0, remaining => 3 });
    }
    is(wait_hits($base), $base, '5 peeks: no upstream hits');
    for my $i (1 .. 3) {
        my $r = req('p', 'f2');
        check_served("f2 request $i after 5 peeks", $r);
        is($r->{headers}{'x-ratelimit-remaining'}, 3 - $i, "f2 request $i: remaining " . (3 - $i));
    }
    is(wait_hits($base + 3), $base + 3, '3 real requests: 3 upstream hits');
    my $j = check_peek('peek f2 at the limit', peek('p', 'f2'),
        { zone => 'pk', key => 'f2', used => 3, remaining => 0, retry_after => sub { $_[0] >= 1 && $_[0] <= 60 } });
    my $r = req('p', 'f2');
    is($r->{status}, 429, 'f2: the 4th real request is rejected');
    check_peek('peek f2 after a rejection', peek('p', 'f2'), { used => 3, remaining => 0 });
    is(wait_hits($base + 3), $base + 3, 'f2: peeks and the rejection added no upstream hits');
}

# --- header name case, values ----------------------------------------------------------------

{
    my $base = hits();
    check_peek('mixed-case name', peek_with('p', 'c1', 'x-RaTeLimit-status: yes'), { key => 'c1', used => 0 });
    check_peek('value "true"', peek_with('p', 'c1', 'X-RateLimit-Status: true'), { key => 'c1', used => 0 });
    check_peek('value "1"', peek_with('p', 'c1', 'X-RATELIMIT-STATUS: 1'), { key => 'c1', used => 0 });
    is(wait_hits($base), $base, 'peeks with other spellings: no upstream hits');

    my $r = peek_with('p', 'c2', 'X-RateLimit-Status: 0');
    check_served('value "0": not a peek', $r);
    is($r->{headers}{'x-ratelimit-remaining'}, 2, 'value "0": counted (remaining 2)');
    $r = peek_with('p', 'c2', 'X-RateLimit-Status: false');
    check_served('value "false": not a peek', $r);
    is($r->{headers}{'x-ratelimit-remaining'}, 1, 'value "false": counted (remaining 1)');
    $r = peek_with('p', 'c2', 'X-RateLimit-Status: ');
    check_served('empty value: not a peek', $r);
    is($r->{headers}{'x-ratelimit-remaining'}, 0, 'empty value: counted (remaining 0)');
    $r = peek_with('p', 'c2', 'X-RateLimit-Status: 0');
    is($r->{status}, 429, 'value "0" over the limit: 429 like any request');
    is(wait_hits($base + 3), $base + 3, 'non-peeks reached the upstream (3 hits)');
    check_peek('peek c2', peek('p', 'c2'), { key => 'c2', used => 3, remaining => 0 });
}

# --- static location: the content handler is not reached ------------------------------

{
    my $r = peek('s', 's1');
    check_peek('peek on a static location', $r, { zone => 'pk', key => 's1', used => 0 });
    check_served('static location without the header', req('s', 's1'));
    check_peek('peek on a static location after a request', peek('s', 's1'), { used => 1, remaining => 2 });
}

# --- two zones: one object per zone, in order ----------------------------------------------

{
    my $base = hits();
    check_served('two zones: request', req('two', 'z1'));
    check_peek('two zones: peek', peek('two', 'z1'),
        { zone => 'pk', key => 'z1', limit => 3, used => 1, remaining => 2 },
        { zone => 'pk2', key => 'z1', limit => 5, used => 1, remaining => 4 });
    is(wait_hits($base + 1), $base + 1, 'two zones: only the real request reached the upstream');
}

# --- inheritance and overriding: http{} level and location level -----------------------------

{
    my $p3 = $t->port('PORT3');
    my $base = hits();
    check_served('http-level header, other name sent: served',
        peek_with('p', 'i1', 'X-RateLimit-Status: 1', port => $p3));
    check_peek('http-level header X-Http-Peek inherited', peek_with('p', 'i1', 'X-Http-Peek: 1', port => $p3),
        { key => 'i1', used => 1 });
    check_peek('location-level header X-Peek', peek_with('lp', 'i2', 'X-Peek: on', port => $p3),
        { key => 'i2', used => 0 });
    check_served('location-level overrides http-level: X-Http-Peek ignored',
        peek_with('lp', 'i2', 'X-Http-Peek: 1', port => $p3));
    check_peek('location-level after one request', peek_with('lp', 'i2', 'X-Peek: on', port => $p3),
        { key => 'i2', used => 1 });
    is(wait_hits($base + 2), $base + 2, 'inheritance: 2 upstream hits (the non-peeks only)');
}

$t->stop_nginx;

# --- without the directive, the header is ignored ------------------------------------------

$t->write_conf($ZONES . <<'EOF' . $UPSTREAM);
server {
    listen 127.0.0.1:%%PORT%%;
    location /p/ { ratelimit zone=pk; proxy_pass http://127.0.0.1:%%PORT2%%/; }
}
EOF
$t->start_nginx;
{
    my $base = hits();
    my @r = map { peek('p', 'n1') } 1 .. 4;
    check_served("no directive: request $_ with X-RateLimit-Status served", $r[$_ - 1]) for 1 .. 3;
    is(join(' ', map { $_->{headers}{'x-ratelimit-remaining'} // '-' } @r[0 .. 2]), '2 1 0',
        'no directive: requests counted');
    is($r[3]{status}, 429, 'no directive: the 4th is rejected');
    is(wait_hits($base + 3), $base + 3, 'no directive: 3 upstream hits');
}
$t->stop_nginx;

# --- a peek whose body cannot be read, with error_page 500 (as in Debian's
# default site): answered with the body's error, not left hanging ------------

$t->write_conf($ZONES . <<'EOF');
server {
    listen 127.0.0.1:%%PORT%%;
    ratelimit_peek_header X-Peek;
    error_page 500 /50x.html;
    location = /50x.html { root %%TMP%%/html; }
    location /p/ { ratelimit zone=pk; alias %%TMP%%/html/; }
}
EOF
$t->write_html('50x.html', "error page\n");
$t->start_nginx;
{
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t->port('PORT'),
                                  Proto => 'tcp', Timeout => 3) or die "connect: $!";
    print {$s} "POST /p/index.html HTTP/1.1\r\nHost: localhost\r\nX-Api-Key: bad-body\r\n"
             . "X-Peek: 1\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\n";
    my $resp = '';
    my $sel = IO::Select->new($s);
    my $t0 = time;
    while (time - $t0 < 3 && $sel->can_read(3 - (time - $t0))) {
        last unless sysread($s, my $buf, 65536);
        $resp .= $buf;
    }
    close $s;
    my ($st) = $resp =~ m{^HTTP/1\.[01] (\d{3})};
    is($st, 400, 'peek with a malformed chunked body: answered 400 at once, not left hanging')
        or diag($resp eq '' ? 'no answer within 3 s' : $resp);
    my $r = $t->get('/p/index.html', { 'X-Api-Key' => 'after-bad-body' });
    is($r->{status}, 200, 'peek with a malformed body: the worker goes on serving');
}
$t->stop_nginx;

$t->no_alerts;

done_testing;
