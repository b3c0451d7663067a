#!/usr/bin/perl
# gRPC answers in gRPC (issue 44).  Two nginx servers of two workers each
# (h2c) and one Redis in front of a Python gRPC server
# (Debian's python3-grpcio, a generic handler of raw bytes) through
# grpc_pass; a Python gRPC client.
#
# Expected: a refused gRPC call (a rate zone's limit, a ban, a GCRA zone, a
# concurrency zone's full queue or its wait's timeout) gets HTTP 200,
# trailers-only (END_STREAM on the HEADERS frame, no DATA), content-type the
# call's media type, grpc-status 8 (the client's
# StatusCode.RESOURCE_EXHAUSTED), grpc-message naming the zone,
# grpc-retry-pushback-ms the Retry-After in ms where there is one, and the
# RateLimit headers.  Exactly the limit of calls
# succeed across both servers and the backend sees exactly those;
# $ratelimit_status says REJECTED / BANNED with $status 200.
# `ratelimit_fail closed` with Redis down: grpc-status 14 (UNAVAILABLE),
# "limit could not be checked", pushback 1000.  `ratelimit_grpc off`: HTTP
# 429 (the client reads UNAVAILABLE).  A request that is not gRPC on the
# same location gets 429 with Retry-After; gRPC-Web over HTTP/1.1 gets the
# gRPC answer with Content-Length 0.  The metrics count the refusals as
# rejected.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use HTTP::Tiny;
use JSON::PP qw(decode_json);
use List::Util qw(sum);
use RateLimitTest qw(hdr);
use PromText;

RateLimitTest::require_module();

my $PYTHON = '/usr/bin/python3';
plan skip_all => 'python3-grpcio not installed'
    unless system($PYTHON, '-c', 'import grpc') == 0;

my $t  = RateLimitTest->new(workers => 2);
my $t2 = RateLimitTest->new(workers => 2);
my @SERVERS = ($t, $t2);
$t->start_redis;
my $REDIS_PORT = $t->redis_port;
my $BACKEND = $t->port('BACKEND');
my $TMP = $t->tmp;
my $CALLS = "$TMP/calls";   # a line per call the backend saw: its method
my $SLOW_S = 1.5;           # what a Slow call holds its permit for

RateLimitTest::_write_file("$TMP/grpc_server.py", <<'EOF');
import os, sys, time
from concurrent import futures
import grpc

port, calls, slow_s = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])

def handler(method, pause):
    def call(request, context):
        fd = os.open(calls, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, (method + '\n').encode())
        os.close(fd)
        time.sleep(pause)
        return request
    return grpc.unary_unary_rpc_method_handler(call)

server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
for svc in sys.argv[4:]:
    name = svc + '.Svc'
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        name, {'Echo': handler('/%s/Echo' % name, 0),
               'Slow': handler('/%s/Slow' % name, slow_s)}),))
server.add_insecure_port('127.0.0.1:%d' % port)
server.start()
server.wait_for_termination()
EOF

# Makes N calls of METHOD as KEY (metadata x-api-key), one after another
# or all at once, spread over two channels (connections) to each target;
# prints a JSON line per call, in order: code, details, trailing metadata,
# seconds taken.
RateLimitTest::_write_file("$TMP/grpc_client.py", <<'EOF');
import json, sys, time
import grpc

method, n, key, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
opts = [('grpc.enable_http_proxy', 0), ('grpc.enable_retries', 0),
        ('grpc.use_local_subchannel_pool', 1)]
stubs = [grpc.insecure_channel(target, options=opts).unary_unary(method)
         for target in sys.argv[5:] for _ in range(2)]
md = (('x-api-key', key),)

def line(code, details, trailing, elapsed):
    print(json.dumps({'code': code, 'details': details,
                      'md': {k: v for k, v in (trailing or ())},
                      'elapsed': elapsed}), flush=True)

if mode == 'parallel':
    calls = []
    for i in range(n):
        start, ends = time.time(), []
        f = stubs[i % len(stubs)].future(b'ping', metadata=md, timeout=20)
        f.add_done_callback(lambda _, ends=ends: ends.append(time.time()))
        calls.append((start, ends, f))
    for start, ends, f in calls:
        try:
            f.result()
        except grpc.RpcError:
            pass
        while not ends:
            time.sleep(0.01)
        line(f.code().name, f.details() or '', f.trailing_metadata(),
             ends[0] - start)
else:
    for i in range(n):
        start = time.time()
        stub = stubs[i % len(stubs)]
        try:
            _, call = stub.with_call(b'ping', metadata=md, timeout=20)
            line('OK', '', call.trailing_metadata(), time.time() - start)
        except grpc.RpcError as e:
            line(e.code().name, e.details(), e.trailing_metadata(),
                 time.time() - start)
EOF

my $server = $t->start_child('grpc server', sub {
    exec $PYTHON, "$TMP/grpc_server.py", $BACKEND, $CALLS, $SLOW_S,
        qw(rate ban gcra conc wait closed off) or die "exec: $!";
});
ok(RateLimitTest::wait_until(sub { RateLimitTest::Process::_port_open($BACKEND) }, 20),
   'the gRPC server listens');

# h2c: `listen ... http2` up to nginx 1.25.0, `http2 on` from 1.25.1 (which
# warns of the former).
my $nginx = RateLimitTest::nginx_bin();
my ($major, $minor, $patch) = `'$nginx' -v 2>&1` =~ m{nginx/(\d+)\.(\d+)\.(\d+)};
my $h2c = sprintf('%d%03d%03d', $major // 0, $minor // 0, $patch // 0) >= 1025001
    ? "listen 127.0.0.1:%%H2%% reuseport;\n    http2 on;"
    : 'listen 127.0.0.1:%%H2%% http2 reuseport;';

my $conf = <<"EOF" . <<'EOF';
ratelimit_redis 127.0.0.1:$REDIS_PORT timeout=2s;
upstream backend { server 127.0.0.1:$BACKEND; }
EOF
ratelimit_zone api key=$http_x_api_key limit=5 window=60s;
ratelimit_zone bz key=$http_x_api_key limit=2 window=60s ban=1h;
ratelimit_zone g key=$http_x_api_key rate=1r/m algorithm=gcra;
ratelimit_zone db key=$http_x_api_key concurrency=2 queue=2 queue_timeout=10s;
ratelimit_zone dbt key=$http_x_api_key concurrency=1 queue=4 queue_timeout=500ms;
server {
    %%H2C%%
    listen 127.0.0.1:%%PORT%% reuseport;  # HTTP/1.1
    location = /metrics { ratelimit_metrics; }
    location /rate.Svc/ { ratelimit zone=api; grpc_pass grpc://backend; }
    location /ban.Svc/ { ratelimit zone=bz; grpc_pass grpc://backend; }
    location /gcra.Svc/ { ratelimit zone=g; grpc_pass grpc://backend; }
    location /conc.Svc/ { ratelimit zone=db; grpc_pass grpc://backend; }
    location /wait.Svc/ { ratelimit zone=dbt; grpc_pass grpc://backend; }
    location /closed.Svc/ {
        ratelimit zone=api;
        ratelimit_fail closed;
        grpc_pass grpc://backend;
    }
    location /off.Svc/ {
        ratelimit zone=api;
        ratelimit_grpc off;
        grpc_pass grpc://backend;
    }
}
EOF
$conf =~ s/%%H2C%%/$h2c/;
$_->write_conf($conf) for @SERVERS;
$_->start_nginx for @SERVERS;

my @TARGETS = map { '127.0.0.1:' . $_->port('H2') } @SERVERS;

# The calls' results (decoded JSON lines), from the client run to its end.
sub calls {
    my ($method, $n, $key, $mode, @targets) = @_;
    open my $fh, '-|', $PYTHON, "$TMP/grpc_client.py", $method, $n, $key,
        $mode, @targets or die "client: $!";
    my @out = map { decode_json($_) } grep { /^\{/ } <$fh>;
    close $fh;
    return @out;
}

sub codes { join ' ', map { $_->{code} } @_ }

# The calls that succeeded and the others.
sub by_outcome {
    return ([grep { $_->{code} eq 'OK' } @_], [grep { $_->{code} ne 'OK' } @_]);
}

sub backend_saw {
    my ($method) = @_;
    open my $fh, '<', $CALLS or return 0;
    return scalar grep { $_ eq "$method\n" } <$fh>;
}

# Access log entries of $uri over both servers with $status 200 and
# $ratelimit_status $rs, once there are $want (a line is written after its
# answer) or 2 s passed.
sub refused_log {
    my ($uri, $rs, $want) = @_;
    my $count = sub {
        my $n = 0;
        for my $srv (@SERVERS) {
            $n += grep { $_->{uri} eq $uri && $_->{status} == 200
                         && $_->{rs} eq $rs } $srv->access_entries;
        }
        return $n;
    };
    RateLimitTest::wait_until(sub { $count->() >= $want }, 2);
    return $count->();
}

# curl's answer over h2c: status line, headers (names in lower case) and
# body.
sub curl_h2c {
    my ($path, @args) = @_;
    my $port = $t->port('H2');
    my $raw = `curl -sS -i --http2-prior-knowledge @args http://127.0.0.1:$port$path 2>&1`;
    my ($head, $rest) = split /\r\n\r\n/, $raw, 2;
    my ($status, @lines) = split /\r\n/, $head;
    my %h = map { /^([^:]+):\s*(.*)$/ ? (lc $1 => $2) : () } @lines;
    return { raw => $raw, status => $status, headers => \%h,
             body => $rest // '' };
}

# --- a rate zone -------------------------------------------------------------

my @r = calls('/rate.Svc/Echo', 12, 'k1', 'serial', @TARGETS);
my ($ok, $no) = by_outcome(@r);
is(scalar @$ok, 5, 'exactly the limit of 5 calls succeed over both servers')
    or diag(codes(@r));
is(scalar(grep { $_->{code} eq 'RESOURCE_EXHAUSTED' } @$no), 7,
   'the other 7 get RESOURCE_EXHAUSTED') or diag(codes(@r));
is(scalar(grep { $_->{details} eq 'rate limited by zone api' } @$no), 7,
   'grpc-message names the zone') or diag(explain($no->[0]));
is(scalar(grep { ($_->{md}{'grpc-retry-pushback-ms'} // '') =~ /^\d+$/
                 && $_->{md}{'grpc-retry-pushback-ms'} > 0
                 && $_->{md}{'grpc-retry-pushback-ms'} <= 60_000
                 && $_->{md}{'grpc-retry-pushback-ms'}
                    == 1000 * $_->{md}{'retry-after'} } @$no), 7,
   'grpc-retry-pushback-ms: Retry-After in ms, within the window')
    or diag(explain($no->[0]));
is(scalar(grep { ($_->{md}{ratelimit} // '') =~ /^"api";r=0;t=\d+$/
                 && ($_->{md}{'ratelimit-policy'} // '') eq '"api";q=5;w=60' } @$no),
   7, 'the RateLimit headers are sent') or diag(explain($no->[0]));
RateLimitTest::wait_until(sub { backend_saw('/rate.Svc/Echo') >= 5 }, 2);
is(backend_saw('/rate.Svc/Echo'), 5, 'the backend saw exactly the 5 calls');
is(refused_log('/rate.Svc/Echo', 'REJECTED', 7), 7,
   'the access log: the 7 refused calls REJECTED, $status 200')
    or diag($t->access_log, $t2->access_log);
is(join(' ', map { my $d = $_; sum(map { PromText::value(PromText::scrape($_),
        'nginx_ratelimit_decisions_total', decision => $d, zone => 'api') }
        @SERVERS) } qw(passed rejected)),
   '5 7', 'the metrics: 5 passed, 7 rejected');

# --- the raw answer ----------------------------------------------------------

my $body = "$TMP/message";
RateLimitTest::_write_file($body, "\0\0\0\0\4ping");
# Without a body: curl 7.88 takes the RST_STREAM (NO_ERROR) that nginx sends
# after a whole answer to a request whose body it did not read (after its
# own error answers too) for an error; the gRPC client and nghttp send one.
my $c = curl_h2c('/rate.Svc/Echo', q{-X POST -H 'te: trailers' -H 'x-api-key: k1'},
                 q{-H 'content-type: application/grpc+proto; charset=x'});
my %h = %{ $c->{headers} };
like($c->{status}, qr{^HTTP/2 200\b}, 'curl over h2c: status 200') or diag($c->{raw});
is($h{'content-type'}, 'application/grpc+proto',
   'content-type: the request\'s media type');
is($h{'grpc-status'}, 8, 'grpc-status: 8');
is($h{'grpc-message'}, 'rate limited by zone api', 'grpc-message');
like($h{'retry-after'} // '', qr/^[1-9]\d*$/, 'Retry-After');
is($h{'grpc-retry-pushback-ms'}, 1000 * ($h{'retry-after'} // 0),
   'grpc-retry-pushback-ms: Retry-After in ms');
is($h{'ratelimit-policy'}, '"api";q=5;w=60', 'RateLimit-Policy');
like($h{ratelimit} // '', qr/^"api";r=0;t=\d+$/, 'RateLimit');
ok(!exists $h{'content-length'}, 'no content-length over HTTP/2');
is($c->{body}, '', 'no body');

SKIP: {
    skip 'nghttp (nghttp2-client) not installed', 2
        unless -x '/usr/bin/nghttp';
    my $port = $t->port('H2');
    my $v = `nghttp -v -H 'content-type: application/grpc' -H 'x-api-key: k1' \\
             -d $body http://127.0.0.1:$port/rate.Svc/Echo 2>&1`;
    my $headers = qr/recv HEADERS frame <[^>]*stream_id=(\d+)>/;
    my ($id) = $v =~ /$headers\s*\n\s*; END_STREAM \| END_HEADERS/;
    ok(defined $id, 'nghttp: the HEADERS frame ends the stream (trailers-only)')
        or diag($v);
    my $data = defined $id && $v =~ /recv DATA frame <[^>]*stream_id=$id>/;
    ok(!$data, 'nghttp: no DATA frame');
}

# --- not gRPC, and gRPC-Web over HTTP/1.1, on the same location --------------

my $ua = HTTP::Tiny->new(timeout => 5);
my $http1 = $t->port('PORT');
my $plain = $ua->request('POST', "http://127.0.0.1:$http1/rate.Svc/Echo",
    { headers => { 'X-Api-Key' => 'k1', 'Content-Type' => 'application/json' },
      content => '{}' });
is($plain->{status}, 429, 'a request that is not gRPC: 429');
like(hdr($plain, 'Retry-After') // '', qr/^[1-9]\d*$/, '... with Retry-After');
ok(!defined hdr($plain, 'grpc-status'), '... and no grpc-status');

$c = curl_h2c('/rate.Svc/Echo',
              q{-X POST -H 'content-type: application/json' -H 'x-api-key: k1'});
like($c->{status}, qr{^HTTP/2 429\b}, 'not gRPC over h2c: 429') or diag($c->{raw});
ok(!exists $c->{headers}{'grpc-status'}, '... and no grpc-status');

my $web = $ua->request('POST', "http://127.0.0.1:$http1/rate.Svc/Echo",
    { headers => { 'X-Api-Key' => 'k1',
                   'Content-Type' => 'application/grpc-web-text' },
      content => 'AAAAAARwaW5n' });
is(join(' ', $web->{status}, hdr($web, 'grpc-status') // '-',
        hdr($web, 'content-type') // '-', hdr($web, 'content-length') // '-',
        length $web->{content}),
   '200 8 application/grpc-web-text 0 0',
   'gRPC-Web over HTTP/1.1: 200, grpc-status 8, Content-Length 0');

# --- a ban -------------------------------------------------------------------

@r = calls('/ban.Svc/Echo', 6, 'k2', 'serial', @TARGETS);
is(codes(@r), 'OK OK' . ' RESOURCE_EXHAUSTED' x 4, 'a ban: 2 calls, then refused')
    or diag(explain(\@r));
is(join('|', map { $_->{details} } @r[2 .. 5]),
   'rate limited by zone bz' . '|banned by zone bz' x 3,
   'the call that sets the ban is rate limited, the later ones banned');
is(scalar(grep { my $p = $_->{md}{'grpc-retry-pushback-ms'} // 0;
                 $p > 60_000 && $p <= 3_600_000
                 && $p == 1000 * $_->{md}{'retry-after'} } @r[2 .. 5]), 4,
   'pushback: the ban\'s time left, in ms') or diag(explain(\@r));
is(backend_saw('/ban.Svc/Echo'), 2, 'the backend saw the 2 calls');
is(refused_log('/ban.Svc/Echo', 'BANNED', 3), 3,
   'the access log: the 3 banned calls BANNED');

# --- a GCRA zone ---------------------------------------------------------------

@r = calls('/gcra.Svc/Echo', 2, 'k6', 'serial', @TARGETS);
is(join('|', map { "$_->{code} $_->{details}" } @r),
   'OK |RESOURCE_EXHAUSTED rate limited by zone g', 'a GCRA zone: 1r/m, the second refused');
my $p = $r[1]{md}{'grpc-retry-pushback-ms'} // 0;
ok($p > 0 && $p <= 60_000 && $p == 1000 * $r[1]{md}{'retry-after'},
   '... pushback: Retry-After in ms, within the minute') or diag(explain(\@r));
is(backend_saw('/gcra.Svc/Echo'), 1, 'the backend saw the first');

# --- a concurrency zone and its queue ----------------------------------------

@r = calls('/conc.Svc/Slow', 6, 'k3', 'parallel', @TARGETS);
($ok, $no) = by_outcome(@r);
is(scalar @$ok, 4, 'concurrency 2, queue 2: 4 of 6 calls at once pass')
    or diag(explain(\@r));
is(scalar(grep { $_->{elapsed} >= 2 * $SLOW_S - 0.1 } @$ok), 2,
   '... 2 of them in turn, after waiting in the queue')
    or diag(explain(\@r));
is(join('|', map { "$_->{code} $_->{details}" } @$no),
   join('|', ('RESOURCE_EXHAUSTED concurrency limit of zone db') x 2),
   'the 2 beyond the queue: RESOURCE_EXHAUSTED, the zone named');
ok(!grep({ exists $_->{md}{'grpc-retry-pushback-ms'} } @$no),
   '... no pushback (no Retry-After: a concurrency zone has no reset)');
is(backend_saw('/conc.Svc/Slow'), 4, 'the backend saw the 4 calls');

@r = calls('/wait.Svc/Slow', 3, 'k4', 'parallel', @TARGETS);
($ok, $no) = by_outcome(@r);
is(scalar @$ok, 1, 'concurrency 1, queue timeout 500 ms: 1 of 3 calls passes')
    or diag(explain(\@r));
is(scalar(grep { $_->{code} eq 'RESOURCE_EXHAUSTED'
                 && $_->{details} eq 'concurrency limit of zone dbt'
                 && $_->{elapsed} >= 0.45 && $_->{elapsed} < $SLOW_S } @$no), 2,
   'the 2 that waited 500 ms: RESOURCE_EXHAUSTED') or diag(explain(\@r));
is(backend_saw('/wait.Svc/Slow'), 1, 'the backend saw the 1 call');

# --- ratelimit_grpc off -----------------------------------------------------

{
    # The client logs the answer's text/html content-type as an error.
    local $ENV{GRPC_VERBOSITY} = 'NONE';
    @r = calls('/off.Svc/Echo', 1, 'k1', 'serial', @TARGETS);
}
ok($r[0]{code} eq 'UNAVAILABLE' && $r[0]{details} =~ /\b429\b/,
   'ratelimit_grpc off: HTTP 429, which the client reads as UNAVAILABLE')
    or diag(explain(\@r));
is(backend_saw('/off.Svc/Echo'), 0, 'the backend saw none');

# --- fail closed -------------------------------------------------------------

@r = calls('/closed.Svc/Echo', 1, 'k5', 'serial', @TARGETS);
is(codes(@r), 'OK', 'fail closed, Redis up: the call passes');
$t->stop_redis;
@r = calls('/closed.Svc/Echo', 4, 'k5', 'serial', @TARGETS);
is(join('|', map { "$_->{code} $_->{details} "
                   . ($_->{md}{'grpc-retry-pushback-ms'} // '-') } @r),
   join('|', ('UNAVAILABLE limit could not be checked 1000') x 4),
   'fail closed, Redis down: UNAVAILABLE, pushback 1000 ms')
    or diag(explain(\@r));
is(backend_saw('/closed.Svc/Echo'), 1, 'the backend saw only the first');
is(refused_log('/closed.Svc/Echo', 'ERROR', 4), 4, 'the access log: ERROR');

$_->no_alerts for @SERVERS;
$t->stop_process($server);
$_->stop_nginx for @SERVERS;
done_testing;
