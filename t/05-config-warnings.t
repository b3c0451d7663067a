#!/usr/bin/perl
# "nginx -t" warnings for configurations that pass but rarely do what was
# meant, and the hints in errors that used to say only what was wrong.
#
# Expected (spec: docs/directives.md):
# - warnings: "nginx -t" passes and prints "[warn] TEXT in nginx.conf:LINE"
#   with the line of the directive that set the trap:
#   - a zone whose key is literal text naming a variable (`key=http_x_api_key`,
#     `key=remote_addr`, `key=arg_user`, a `map`'s variable): one counter for
#     every request; a literal that names none (`key=all`) gets none;
#   - a zone whose bucket= cuts its window into more than 512 buckets;
#   - a window above 31 days;
#   - each ratelimit_redis_ssl_* directive given while ratelimit_redis_ssl is
#     off (or not given);
# - hints: "rate=" on a concurrency zone and "queue="/"queue_timeout=" on a
#   rate zone; "lease=5s" on a rate zone (its lease= is a size)
#   say which kind of zone takes them; "cluster" after an address says it
#   must come first; "sentinel" without "=NAME" says it takes the master's
#   name; a prefix a cluster cannot take is told at the ratelimit_prefix line.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use RateLimitTest;

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 1);
my $CONF = $t->conf_path;

my $REDIS = 'ratelimit_redis 127.0.0.1:%%REDIS_PORT%%;';

my $SERVER = <<'EOF';
server {
    listen 127.0.0.1:%%PORT%%;
    location / { ratelimit zone=api; }
}
EOF

# conf_warns(name, body, [line_re, text], ...): nginx -t passes with a
# [warn] of each text at the line matching its line_re, and no other warn.
sub conf_warns {
    my ($name, $body, @warns) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    $t->write_conf($body);
    my ($st, $out) = $t->nginx_t;
    is($st, 0, "$name: nginx -t passes") or diag($out);
    for my $w (@warns) {
        my ($re, $text) = @$w;
        my $line = $t->conf_line($re) or die "test bug: no line matching $re";
        like($out, qr/\[warn\] \Q$text\E in \Q$CONF\E:$line\n/,
             "$name: [warn] at line $line: $text") or diag($out);
    }
    my $n = () = $out =~ /^nginx: \[warn\]/mg;
    is($n, scalar @warns, "$name: " . scalar(@warns) . ' warning(s)') or diag($out);
}

# conf_fails(name, body, line_re, text): nginx -t fails with the [emerg]
# text at the line matching line_re.
sub conf_fails {
    my ($name, $body, $re, $text) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    $t->write_conf($body);
    my ($st, $out) = $t->nginx_t;
    isnt($st, 0, "$name: nginx -t fails");
    my $line = $t->conf_line($re) or die "test bug: no line matching $re";
    like($out, qr/\[emerg\] \Q$text\E,? in \Q$CONF\E:$line\n/,
         "$name: [emerg] at line $line: $text") or diag($out);
}

# --- a literal key naming a variable ---------------------------------------

for my $key (qw(http_x_api_key remote_addr arg_user cookie_session Binary_Remote_Addr)) {
    conf_warns("key=$key", <<"EOF" . $SERVER,
$REDIS
ratelimit_zone api key=$key rate=10r/s;
EOF
        [qr/ratelimit_zone api key=$key /,
         qq{key "$key" is a literal: every request shares one counter; did you mean "\$$key"?}]);
}

conf_warns('key= naming a map\'s variable', <<"EOF" . $SERVER,
$REDIS
map \$http_x_api_key \$plan_key { default \$http_x_api_key; }
ratelimit_zone api key=plan_key rate=10r/s;
EOF
    [qr/key=plan_key/,
     'key "plan_key" is a literal: every request shares one counter; did you mean "$plan_key"?']);

conf_warns('key=all, key=service, key=site:all: meant, no warning', <<"EOF" . $SERVER);
$REDIS
ratelimit_zone api key=all rate=10r/s;
ratelimit_zone svc key=service rate=10r/s;
ratelimit_zone site key=site:all rate=10r/s;
ratelimit_zone var key=\$http_x_api_key rate=10r/s;
EOF

# --- buckets and windows ---------------------------------------------------

conf_warns('3600000 buckets', <<"EOF" . $SERVER,
$REDIS
ratelimit_zone api key=\$binary_remote_addr limit=100 window=1h bucket=1ms;
EOF
    [qr/bucket=1ms/, 'bucket=1ms cuts the window into 3600000 buckets: a busy '
        . "subject's Redis key holds a field for each, compact up to 512; use bucket=7200ms or longer"]);

conf_warns('512 buckets, the default buckets of a long window: no warning', <<"EOF" . $SERVER);
$REDIS
ratelimit_zone api key=\$binary_remote_addr limit=100 window=512s bucket=1s;
ratelimit_zone week key=\$binary_remote_addr limit=100 window=31d;
EOF

conf_warns('window=400d', <<"EOF" . $SERVER,
$REDIS
ratelimit_zone api key=\$binary_remote_addr limit=100 window=400d;
EOF
    [qr/window=400d/, "window=400d keeps each subject's Redis key until a window after its last request: "
        . 'Redis holds every subject seen in that time; keep windows to 31d or less']);

# --- a cost or limit the client sets (issue 39) ----------------------------

my $CLIENT = ' takes a value the client sends: each client chooses its own %s; '
           . 'give it through a map that allows only the values meant (docs/recipes.md)';

conf_warns('cost=$arg_, limit=$http_, rate=$cookie_', <<"EOF",
$REDIS
ratelimit_zone api key=\$binary_remote_addr limit=\$http_x_limit window=1m;
ratelimit_zone per key=\$binary_remote_addr rate=\${cookie_plan}r/s window=1m;
map \$arg_n \$tokens { default 1; "~^[1-9][0-9]{0,3}\$" \$arg_n; }
server {
    listen 127.0.0.1:%%PORT%%;
    location / { ratelimit zone=api cost=\$arg_max_tokens; }
    location /m/ { ratelimit zone=api cost=\$tokens; }
}
EOF
    [qr/limit=\$http_x_limit/, 'limit=$http_x_limit' . sprintf($CLIENT, 'limit')],
    [qr/rate=\$\{cookie_plan/, 'rate=${cookie_plan}r/s' . sprintf($CLIENT, 'rate')],
    [qr/cost=\$arg_max_tokens/, 'cost=$arg_max_tokens' . sprintf($CLIENT, 'cost')]);

# --- TLS settings while ratelimit_redis_ssl is off -------------------------

my @TLS = (
    "ratelimit_redis_ssl_certificate $CONF;",
    "ratelimit_redis_ssl_certificate_key $CONF;",
    "ratelimit_redis_ssl_trusted_certificate $CONF;",
    'ratelimit_redis_ssl_verify off;',
    'ratelimit_redis_ssl_verify_depth 2;',
    'ratelimit_redis_ssl_name redis.test;',
    'ratelimit_redis_ssl_server_name on;',
    'ratelimit_redis_ssl_protocols TLSv1.3;',
    'ratelimit_redis_ssl_ciphers HIGH;',
);

sub tls_warnings {
    map { my ($d) = /^(\S+)/; [qr/^\Q$_\E$/, qq{"$d" ignored: ratelimit_redis_ssl is off}] } @TLS;
}

conf_warns('TLS settings without ratelimit_redis_ssl', $REDIS . "\n"
    . join("\n", @TLS) . "\nratelimit_zone api key=\$binary_remote_addr rate=10r/s;\n" . $SERVER,
    tls_warnings());

conf_warns('TLS settings with ratelimit_redis_ssl off', "ratelimit_redis_ssl off;\n" . $REDIS . "\n"
    . join("\n", @TLS) . "\nratelimit_zone api key=\$binary_remote_addr rate=10r/s;\n" . $SERVER,
    tls_warnings());

conf_warns('ratelimit_redis_ssl off alone: no warning', <<"EOF" . $SERVER);
ratelimit_redis_ssl off;
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF

# --- hints in errors -------------------------------------------------------

conf_fails('rate= on a concurrency zone', <<"EOF" . $SERVER,
$REDIS
ratelimit_zone api key=\$binary_remote_addr concurrency=2 rate=10r/s;
EOF
    qr/concurrency=2 rate=/, '"rate=" is for rate zones; "api" is a concurrency zone (concurrency=)');

# lease= on a rate zone is its quota leases' memory: a time is no size.
conf_fails('lease=5s on a rate zone', <<"EOF" . $SERVER,
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s lease=5s;
EOF
    qr/rate=10r\/s lease=5s/, q{invalid lease "5s": a rate zone's lease= is the shared memory of its quota leases, at least 32k, such as 1m});

for my $param (qw(queue=5 queue_timeout=1s)) {
    my ($name) = $param =~ /^(\w+=)/;
    conf_fails("$param on a rate zone", <<"EOF" . $SERVER,
$REDIS
ratelimit_zone api key=\$binary_remote_addr rate=10r/s $param;
EOF
        qr/rate=10r\/s \Q$param\E/, qq{"$name" is for concurrency zones (concurrency=); "api" is a rate zone});
}

conf_fails('cluster after an address', <<"EOF" . $SERVER,
ratelimit_redis 127.0.0.1:7000 cluster;
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
    qr/ratelimit_redis 127/, '"cluster" must come first: ratelimit_redis cluster ADDRESS ...');

conf_fails('sentinel without its name', <<"EOF" . $SERVER,
ratelimit_redis 127.0.0.1:26379 127.0.0.1:26380 sentinel;
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
EOF
    qr/ratelimit_redis 127/, q{"sentinel" needs the master's name: sentinel=NAME});

conf_fails('a prefix a cluster cannot take: at the prefix\'s line', <<"EOF" . $SERVER,
ratelimit_redis cluster 127.0.0.1:%%REDIS_PORT%%;
ratelimit_zone api key=\$binary_remote_addr rate=10r/s;
ratelimit_prefix "{rl}";
EOF
    qr/ratelimit_prefix/, 'ratelimit_prefix "{rl}" cannot hold "{" or "}" with a cluster: keys put the subject in a hash tag');

done_testing;
