#!/usr/bin/perl
# Configuration parsing: valid forms pass "nginx -t", invalid ones fail with a
# message naming the directive/value and "nginx.conf:LINE".

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use RateLimitTest;

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 1);

my $REDIS = 'ratelimit_redis 127.0.0.1:%%REDIS_PORT%%;';

sub server {
    my ($loc) = @_;
    $loc //= 'ratelimit zone=api;';
    return <<"EOF";
server {
    listen 127.0.0.1:%%PORT%%;
    location / {
        root %%TMP%%/html;
        $loc
    }
}
EOF
}

sub conf_ok {
    my ($name, $body) = @_;
    $t->write_conf($body);
    my ($st, $out) = $t->nginx_t;
    is($st, 0, "valid: $name") or diag($out);
}

# conf_err(name, body, line_re, [alternatives for directive/value], @must_contain)
sub conf_err {
    my ($name, $body, $line_re, $names, @must) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    $t->write_conf($body);
    my ($st, $out) = $t->nginx_t;
    isnt($st, 0, "invalid: $name: nginx -t fails");
    my $line = $t->conf_line($line_re);
    die "test bug: no line matching $line_re" unless $line;
    like($out, qr/nginx\.conf:\d+/, "invalid: $name: message has nginx.conf:LINE") or diag($out);
    like($out, qr/nginx\.conf:$line\b/, "invalid: $name: line number is $line") or diag($out);
    my $alt = join '|', map { quotemeta } @$names;
    like($out, qr/$alt/, "invalid: $name: names the directive or value") or diag($out);
    for my $s (@must) {
        like($out, qr/\Q$s\E/, "invalid: $name: contains '$s'") or diag($out);
    }
}

# --- valid configurations -------------------------------------------------

conf_ok('minimal', <<"EOF" . server());
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF

conf_ok('all parameters and forms', <<'EOF' . <<'EOF2');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% db=2 user=rluser password=secret timeout=100ms connect_timeout=1s;
ratelimit_prefix myapp;
ratelimit_zone z1 key=$binary_remote_addr rate=10r/s;
ratelimit_zone z2 key=$http_x_api_key rate=10r/m;
ratelimit_zone z3 key=$host:$http_x_api_key rate=5r/h;
ratelimit_zone z4 key=$http_x_api_key rate=1r/d;
ratelimit_zone z5 key=$http_x_api_key limit=5 window=2s;
ratelimit_zone z6 key=$http_x_api_key limit=10 window=1s bucket=100ms;
ratelimit_zone z7 key=$http_x_api_key limit=3 window=1m bucket=1s;
ratelimit_zone z8 key=$http_x_api_key limit=7 window=61ms;
ratelimit_zone z9 key=$http_x_api_key rate=100r/s bucket=50ms;
ratelimit zone=z1;
ratelimit_status 503;
ratelimit_grpc off;
ratelimit_headers on;
ratelimit_fail open;
ratelimit_dry_run off;
ratelimit_log_level info;
EOF
server {
    listen 127.0.0.1:%%PORT%%;
    ratelimit zone=z2;
    ratelimit zone=z3 dry_run;
    ratelimit_status 400;
    ratelimit_headers off;
    ratelimit_fail closed;
    ratelimit_dry_run on;
    ratelimit_log_level notice;
    location / {
        root %%TMP%%/html;
        ratelimit zone=z4;
        ratelimit zone=z5;
        ratelimit zone=z6;
        ratelimit zone=z7;
        ratelimit zone=z8;
        ratelimit zone=z9 dry_run;
        ratelimit_status 599;
        ratelimit_log_level warn;
    }
    location /e/ {
        root %%TMP%%/html;
        ratelimit_log_level error;
        ratelimit_status 429;
    }
}
EOF2

conf_ok('unix socket address', <<'EOF' . server());
ratelimit_redis unix:%%TMP%%/redis.sock db=1;
ratelimit_zone api key=$http_x_api_key limit=3 window=10s;
EOF

conf_ok('new keys hashes', <<'EOF' . server());
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% layout=hash;
ratelimit_zone api key=$http_x_api_key limit=3 window=10s;
EOF

conf_ok('new keys packed strings', <<'EOF' . server());
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% layout=packed;
ratelimit_zone api key=$http_x_api_key limit=3 window=10s;
EOF

# --- invalid configurations -----------------------------------------------

conf_err('unknown zone', <<"EOF" . server('ratelimit zone=nope;'),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
    qr/ratelimit zone=nope;/, ['ratelimit', 'nope'], 'unknown ratelimit zone "nope"');

conf_err('duplicate zone', <<"EOF" . server(),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
ratelimit_zone api key=\$http_x_api_key rate=5r/s;
EOF
    qr/ratelimit_zone api key=\$http_x_api_key/, ['ratelimit_zone', 'api'], 'is duplicate');

conf_err('rate=0r/s', <<"EOF" . server(),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=0r/s;
EOF
    qr/rate=0r\/s/, ['ratelimit_zone', '0r/s'], 'invalid rate');

conf_err('bucket does not divide window', <<"EOF" . server(),
$REDIS
ratelimit_zone api key=\$binary_remote_addr limit=10 window=1s bucket=300ms;
EOF
    qr/bucket=300ms/, ['ratelimit_zone', 'bucket', '300ms'], 'does not divide');

conf_err('unknown parameter in ratelimit_zone', <<"EOF" . server(),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s foo=bar;
EOF
    qr/foo=bar/, ['ratelimit_zone', 'foo=bar'], 'invalid parameter "foo=bar"');

conf_err('unknown parameter in ratelimit', <<"EOF" . server('ratelimit zone=api foo=bar;'),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
    qr/foo=bar/, ['ratelimit', 'foo=bar'], 'invalid parameter "foo=bar"');

my $dashboards = 'ratelimit zone=api; } location = /d1 { ratelimit_dashboard; } '
    . 'location = /d2 { ratelimit_dashboard metrics=/m/json status=/rl delete=on override=off;';
conf_ok('ratelimit_dashboard, its defaults and its parameters', <<"EOF" . server($dashboards));
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF

for my $bad (['foo=bar', 'invalid parameter "foo=bar"'],
             ['metrics=metrics', 'invalid parameter "metrics=metrics"'],
             ['status=/rl?zone=api', 'invalid parameter "status=/rl?zone=api"'],
             ["'status=/a\"b'", 'invalid parameter "status=/a"b"'],
             ['delete=yes', 'invalid parameter "delete=yes"'],
             ['metrics=/a metrics=/b', 'duplicate parameter "metrics=/b"'],
             ['; ratelimit_dashboard', '"ratelimit_dashboard" directive is duplicate']) {
    my ($params, $text) = @$bad;
    conf_err("ratelimit_dashboard $params", <<"EOF" . server("ratelimit zone=api; ratelimit_dashboard $params;"),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
        qr/ratelimit_dashboard \Q$params\E;/, ['ratelimit_dashboard', $text], $text);
}

conf_err('unknown parameter in ratelimit_redis', <<'EOF' . server(),
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% foo=bar;
ratelimit_zone api key=$binary_remote_addr rate=10r/s;
EOF
    qr/foo=bar/, ['ratelimit_redis', 'foo=bar'], 'invalid parameter "foo=bar"');

conf_err('a layout of new keys that is none', <<'EOF' . server(),
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% layout=string;
ratelimit_zone api key=$binary_remote_addr rate=10r/s;
EOF
    qr/layout=string/, ['ratelimit_redis', 'layout=string'], 'invalid parameter "layout=string"');

conf_err('bad redis address', <<'EOF' . server(),
ratelimit_redis 127.0.0.1:notaport;
ratelimit_zone api key=$binary_remote_addr rate=10r/s;
EOF
    qr/notaport/, ['ratelimit_redis', 'notaport']);

for my $code (200, 600, 399) {
    conf_err("ratelimit_status $code", <<"EOF" . server("ratelimit zone=api; ratelimit_status $code;"),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
        qr/ratelimit_status $code/, ['ratelimit_status', $code]);
}

conf_err('ratelimit_grpc bad value', <<"EOF" . server('ratelimit zone=api; ratelimit_grpc maybe;'),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
    qr/ratelimit_grpc maybe/, ['ratelimit_grpc', 'maybe'],
    'it must be "on" or "off"');

conf_err('ratelimit_fail bad value', <<"EOF" . server('ratelimit zone=api; ratelimit_fail maybe;'),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
    qr/ratelimit_fail maybe/, ['ratelimit_fail', 'maybe']);

conf_ok('ratelimit_fail local, with servers= and the memory', <<"EOF" . server('ratelimit zone=api; ratelimit_fail local servers=3;'));
$REDIS
ratelimit_local_memory 1m;
ratelimit_fail local;
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF

for my $bad ('local servers=0', 'local servers=x', 'local servers=', 'open servers=2',
             'local sometimes', 'locally')
{
    my ($word) = $bad =~ /(\S+)$/;
    conf_err("ratelimit_fail $bad", <<"EOF" . server("ratelimit zone=api; ratelimit_fail $bad;"),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
        qr/ratelimit_fail \Q$bad\E;/, [$word], "invalid parameter \"$word\"");
}

conf_ok('ratelimit_fail closed status=429', <<"EOF" . server('ratelimit zone=api; ratelimit_fail closed status=429;'));
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF

my %fail_error = (
    'closed status=399' => 'must be between 400 and 599',
    'closed status=600' => 'must be between 400 and 599',
    'closed status=x'   => 'must be between 400 and 599',
    'closed status='    => 'must be between 400 and 599',
    'open status=503'   => 'invalid parameter',
    'local status=503'  => 'invalid parameter',
    'closed servers=2'  => 'invalid parameter',
);
for my $bad (sort keys %fail_error) {
    my ($word) = $bad =~ /(\S+)$/;
    my $text = $fail_error{$bad} eq 'invalid parameter'
             ? "invalid parameter \"$word\"" : "\"$word\" $fail_error{$bad}";
    conf_err("ratelimit_fail $bad", <<"EOF" . server("ratelimit zone=api; ratelimit_fail $bad;"),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
        qr/ratelimit_fail \Q$bad\E;/, [$word], $text);
}

conf_err('ratelimit_fail twice', <<"EOF" . server('ratelimit zone=api; ratelimit_fail local; ratelimit_fail open;'),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
    qr/ratelimit_fail local; ratelimit_fail open/, ['ratelimit_fail'], 'is duplicate');

conf_err('ratelimit_local_memory too small', <<"EOF" . server('ratelimit zone=api; ratelimit_fail local;'),
$REDIS
ratelimit_local_memory 16k;
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
    qr/ratelimit_local_memory 16k/, ['ratelimit_local_memory'], 'at least 64k');

conf_err('ratelimit_log_level debug', <<"EOF" . server('ratelimit zone=api; ratelimit_log_level debug;'),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
    qr/ratelimit_log_level debug/, ['ratelimit_log_level', 'debug']);

conf_err('missing key', <<"EOF" . server(),
$REDIS
ratelimit_zone api rate=10r/s;
EOF
    qr/ratelimit_zone api rate/, ['ratelimit_zone', 'key']);

conf_err('empty key', <<"EOF" . server(),
$REDIS
ratelimit_zone api key= rate=10r/s;
EOF
    qr/ratelimit_zone api key=/, ['ratelimit_zone', 'key']);

conf_err('neither rate nor limit', <<"EOF" . server(),
$REDIS
ratelimit_zone api key=\$binary_remote_addr;
EOF
    qr/ratelimit_zone api key/, ['ratelimit_zone', 'rate', 'limit']);

conf_err('limit without window', <<"EOF" . server(),
$REDIS
ratelimit_zone api key=\$binary_remote_addr limit=5;
EOF
    qr/ratelimit_zone api key/, ['ratelimit_zone', 'window', 'limit']);

conf_err('limit=0', <<"EOF" . server(),
$REDIS
ratelimit_zone api key=\$binary_remote_addr limit=0 window=1s;
EOF
    qr/limit=0/, ['ratelimit_zone', 'limit']);

conf_err('window over a million weeks', <<"EOF" . server(),
$REDIS
ratelimit_zone api key=\$binary_remote_addr limit=5 window=15250000w;
EOF
    qr/window=15250000w/, ['ratelimit_zone', 'window'], 'at most 1000000w');

conf_ok('window of a million weeks', <<"EOF" . server());
$REDIS
ratelimit_zone api key=\$binary_remote_addr limit=5 window=1000000w;
EOF

conf_err('bad rate unit', <<"EOF" . server(),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/x;
EOF
    qr/rate=10r\/x/, ['ratelimit_zone', 'rate']);

conf_ok('cost= and ratelimit_settle', <<"EOF" . server('ratelimit zone=api cost=0; ratelimit zone=tok cost=$arg_max; ratelimit_settle zone=api $status empty=refund; ratelimit_settle zone=tok $body_bytes_sent;'));
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
ratelimit_zone tok key=\$binary_remote_addr limit=9007199254740992 window=1m;
EOF

for my $bad (['cost=-1', '-1'], ['cost=1.5', '1.5'], ['cost=9007199254740993', '9007199254740993']) {
    conf_err("ratelimit $bad->[0]", <<"EOF" . server("ratelimit zone=api $bad->[0];"),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
        qr/ratelimit zone=api cost=/, ['ratelimit', $bad->[1]], "invalid cost \"$bad->[1]\"");
}

conf_err('ratelimit cost twice', <<"EOF" . server('ratelimit zone=api cost=1 cost=2;'),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
    qr/ratelimit zone=api cost=1 cost=2/, ['ratelimit', 'cost=2'], 'duplicate parameter');

conf_err('ratelimit_settle of a zone the location does not apply', <<"EOF" . server('ratelimit zone=api; ratelimit_settle zone=other $status;'),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
ratelimit_zone other key=\$binary_remote_addr rate=10r/s;
EOF
    qr/ratelimit_settle zone=other/, ['ratelimit_settle', 'other'], 'needs "ratelimit zone=other"');

conf_ok('lease= on rate zones', <<"EOF" . server('ratelimit zone=api; ratelimit zone=fx;'));
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s lease=1m;
ratelimit_zone fx key=\$binary_remote_addr limit=\$arg_l window=1m algorithm=fixed lease=64k;
EOF

conf_ok('top= on rate zones', <<"EOF" . server('ratelimit zone=api; ratelimit zone=fx;'));
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s top=8;
ratelimit_zone fx key=\$binary_remote_addr rate=10r/s top=off;
ratelimit_zone big key=\$binary_remote_addr rate=10r/s top=1024;
EOF

for my $bad ('7', '1025', 'on', '') {
    conf_err("top=$bad", <<"EOF" . server(),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s top=$bad;
EOF
        qr/top=\Q$bad\E;/, ['top'], "invalid top \"$bad\"", '8 to 1024, or off');
}

conf_err('top= on a concurrency zone', <<"EOF" . server(),
$REDIS
ratelimit_zone api key=\$binary_remote_addr concurrency=2 top=8;
EOF
    qr/top=8/, ['top='], '"top=" is for rate zones');

conf_err('lease= too small', <<"EOF" . server(),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s lease=1k;
EOF
    qr/lease=1k/, ['ratelimit_zone', '1k'], 'at least 32k');

conf_err('lease= on a GCRA zone', <<"EOF" . server(),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s algorithm=gcra lease=1m;
EOF
    qr/lease=1m/, ['lease='], '"lease=" applies to sliding and fixed windows only');

conf_err('ratelimit_settle of a leased zone', <<"EOF" . server('ratelimit zone=api; ratelimit_settle zone=api $status;'),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s lease=1m;
EOF
    qr/ratelimit_settle zone=api/, ['ratelimit_settle', 'api'], 'a zone with "lease=" takes no settle');

conf_err('ratelimit_settle empty=', <<"EOF" . server('ratelimit zone=api; ratelimit_settle zone=api $status empty=zero;'),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
    qr/ratelimit_settle zone=api/, ['ratelimit_settle', 'empty=zero'], '"keep" or "refund"');

conf_err('ratelimit_settle without a value', <<"EOF" . server('ratelimit zone=api; ratelimit_settle zone=api empty=keep;'),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
    qr/ratelimit_settle zone=api/, ['ratelimit_settle'], 'must have "zone=" and a value');

conf_err('ratelimit_settle of the same zone twice', <<"EOF" . server('ratelimit zone=api; ratelimit_settle zone=api $status; ratelimit_settle zone=api 1;'),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
    qr/ratelimit_settle zone=api 1;/, ['ratelimit_settle', 'api'], 'settled already');

conf_err('ratelimit without zone=', <<"EOF" . server('ratelimit dry_run;'),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
    qr/ratelimit dry_run;/, ['ratelimit', 'zone']);

conf_err('ratelimit_zone inside server', <<"EOF",
$REDIS
server {
    listen 127.0.0.1:%%PORT%%;
    ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
}
EOF
    qr/ratelimit_zone api/, ['ratelimit_zone'], 'not allowed here');

conf_err('ratelimit_redis inside server', <<"EOF",
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
server {
    listen 127.0.0.1:%%PORT%%;
    ratelimit_redis 127.0.0.1:%%REDIS_PORT%%;
}
EOF
    qr/ratelimit_redis/, ['ratelimit_redis'], 'not allowed here');

conf_err('ratelimit_prefix inside location', <<"EOF" . server('ratelimit_prefix x;'),
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
    qr/ratelimit_prefix x;/, ['ratelimit_prefix'], 'not allowed here');

# --- a valid configuration really starts and serves ------------------------

$t->start_redis;
$t->write_conf(<<'EOF');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=1s;
ratelimit_zone api key=$http_x_api_key limit=5 window=10s;
server {
    listen 127.0.0.1:%%PORT%%;
    location / {
        root %%TMP%%/html;
        ratelimit zone=api;
    }
}
EOF
$t->start_nginx;
my $r = $t->get('/index.html', { 'X-Api-Key' => 'cfg' });
is($r->{status}, 200, 'valid config serves');
is($r->{content}, "index page\n", 'static content');
$t->stop_nginx;
$t->no_alerts;

done_testing;
