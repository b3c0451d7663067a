#!/usr/bin/perl
# Configuration of the Redis connection: TLS directives, sentinel= and its
# credentials, password_file=.
#
# Expected (spec): bad combinations (sentinel_user without sentinel=, a
# certificate key without a certificate or the reverse, an unreadable CA
# file, two addresses without sentinel=, TLS verification of a unix socket
# without ratelimit_redis_ssl_name) and an unreadable password_file fail
# "nginx -t" with nginx.conf:LINE and a message naming the directive or file;
# password_file's secret is its first line (the newline is not part of it),
# up to 16384 bytes (what Redis reads before AUTH): a longer one fails
# "nginx -t" saying so, a 16384-byte one authenticates; a password_file its
# group or others have access to (mode & 077) gives a [warn] naming the
# file, its mode and nginx.conf:LINE, and nginx -t passes;
# no secret (password=, password_file's content, sentinel_password=) ever
# appears in nginx -t's output or in the error log, also at debug level and
# when Redis refuses it.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use FaultTest qw(rhdr);
use RateLimitTest qw(fail_policy_http);
use TestCerts;

RateLimitTest::require_module();

my $t = FaultTest->new(workers => 2);
my $tmp = $t->tmp;
my $pki = TestCerts->new("$tmp/pki");

sub fail_policy { fail_policy_http($_[0], limit => 2) }

sub write_secret {
    my ($name, $content, $mode) = @_;
    my $p = "$tmp/$name";
    open my $fh, '>', $p or die "$p: $!";
    print {$fh} $content;
    close $fh;
    chmod $mode // 0600, $p;
    return $p;
}

sub conf_ok {
    my ($name, $http) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    $t->write_conf(fail_policy($http));
    my ($st, $out) = $t->nginx_t;
    is($st, 0, "valid: $name") or diag($out);
    return $out;
}

# conf_err(name, http text, [regexes of the lines that may be named], [words one of which must be named])
sub conf_err {
    my ($name, $http, $line_res, $names) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    $t->write_conf(fail_policy($http));
    my ($st, $out) = $t->nginx_t;
    isnt($st, 0, "invalid: $name: nginx -t fails");
    note("nginx -t: $1") if $out =~ /(\[emerg\][^\n]*)/;
    my @lines = map { $t->conf_line($_) // die "test bug: no line $_" } @$line_res;
    my $lre = join '|', @lines;
    like($out, qr/\[emerg\].*in \Q$tmp\E\/nginx\.conf:(?:$lre)\b/, "invalid: $name: [emerg] ... nginx.conf:" . join('/', @lines))
        or diag($out);
    my $alt = join '|', map { quotemeta } @$names;
    like($out, qr/\[emerg\][^\n]*(?:$alt)/, "invalid: $name: the message names " . join(' or ', @$names))
        or diag($out);
    return $out;
}

# --- valid ------------------------------------------------------------------------

my $pwfile = write_secret('redis.pw', "pw-from-file-7Q\nsecond line is not the password\n");

conf_ok('every TLS directive', <<"EOF");
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=100ms connect_timeout=500ms;
ratelimit_redis_ssl on;
ratelimit_redis_ssl_trusted_certificate $pki->{ca};
ratelimit_redis_ssl_verify on;
ratelimit_redis_ssl_verify_depth 2;
ratelimit_redis_ssl_name redis.test;
ratelimit_redis_ssl_server_name on;
ratelimit_redis_ssl_certificate $pki->{client};
ratelimit_redis_ssl_certificate_key $pki->{client_key};
ratelimit_redis_ssl_protocols TLSv1.2 TLSv1.3;
ratelimit_redis_ssl_ciphers HIGH:!aNULL;
EOF
conf_ok('ratelimit_redis_ssl off, verify off', <<'EOF');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%%;
ratelimit_redis_ssl off;
ratelimit_redis_ssl_verify off;
EOF
conf_ok('sentinel= with three sentinels and every credential', <<"EOF");
ratelimit_redis 127.0.0.1:%%S1%% 127.0.0.1:%%S2%% localhost:%%S3%% sentinel=mymaster db=3 user=u password=p sentinel_user=su sentinel_password=sp timeout=100ms;
EOF
conf_ok('sentinel= with one sentinel', <<'EOF');
ratelimit_redis 127.0.0.1:%%S1%% sentinel=mymaster;
EOF
{
    my $out = conf_ok('password_file=', <<"EOF");
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% password_file=$pwfile;
EOF
    unlike($out, qr/\[warn\]/, 'password_file= of mode 0600: no warning') or diag($out);
}
for my $mode (0644, 0640, 0604, 0620, 0610) {
    my $text = sprintf '%04o', $mode;
    my $file = write_secret("open-$text.pw", "pw\n", $mode);
    my $out = conf_ok("password_file= of mode $text", <<"EOF");
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% password_file=$file;
EOF
    my $line = $t->conf_line(qr/^\s*ratelimit_redis /);
    like($out, qr/\[warn\] [^\n]*password_file "\Q$file\E" has mode $text: its group or others have access to it in \Q$tmp\E\/nginx\.conf:$line\b/,
         "password_file= of mode $text: [warn] naming the file, its mode, nginx.conf:$line") or diag($out);
}
{
    my $longest = write_secret('longest.pw', ('L' x 16384) . "\n");
    conf_ok('password_file= with a password of 16384 bytes', <<"EOF");
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% password_file=$longest;
EOF
}

# --- invalid ----------------------------------------------------------------------

conf_err('sentinel_user= without sentinel=', <<'EOF', [qr/^\s*ratelimit_redis /], ['sentinel_user', 'sentinel=']);
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% sentinel_user=su sentinel_password=sp;
EOF
conf_err('two addresses without sentinel=', <<'EOF', [qr/^\s*ratelimit_redis /], ['sentinel', '127.0.0.1:' . $t->port('OTHER')]);
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% 127.0.0.1:%%OTHER%%;
EOF
conf_err('certificate key without certificate', <<"EOF",
ratelimit_redis 127.0.0.1:%%REDIS_PORT%%;
ratelimit_redis_ssl on;
ratelimit_redis_ssl_trusted_certificate $pki->{ca};
ratelimit_redis_ssl_certificate_key $pki->{client_key};
EOF
    [qr/ratelimit_redis_ssl_certificate_key/], ['ratelimit_redis_ssl_certificate']);
conf_err('certificate without certificate key', <<"EOF",
ratelimit_redis 127.0.0.1:%%REDIS_PORT%%;
ratelimit_redis_ssl on;
ratelimit_redis_ssl_trusted_certificate $pki->{ca};
ratelimit_redis_ssl_certificate $pki->{client};
EOF
    [qr/ratelimit_redis_ssl_certificate /], ['ratelimit_redis_ssl_certificate_key']);
conf_err('missing CA file', <<"EOF", [qr/ratelimit_redis_ssl_trusted_certificate/], ["$tmp/no-such-ca.crt"]);
ratelimit_redis 127.0.0.1:%%REDIS_PORT%%;
ratelimit_redis_ssl on;
ratelimit_redis_ssl_trusted_certificate $tmp/no-such-ca.crt;
EOF
write_secret('garbage.crt', "this is not a certificate\n");
conf_err('CA file that is not a certificate', <<"EOF", [qr/ratelimit_redis_ssl_trusted_certificate/], ["$tmp/garbage.crt"]);
ratelimit_redis 127.0.0.1:%%REDIS_PORT%%;
ratelimit_redis_ssl on;
ratelimit_redis_ssl_trusted_certificate $tmp/garbage.crt;
EOF
# Without ratelimit_redis_ssl_name each address is checked against its own
# host: a unix socket has none, wherever it stands in the list.
conf_err('TLS verification of a unix socket, no ratelimit_redis_ssl_name', <<"EOF",
ratelimit_redis unix:$tmp/redis.sock;
ratelimit_redis_ssl on;
ratelimit_redis_ssl_trusted_certificate $pki->{ca};
EOF
    [qr/^\s*ratelimit_redis /], ["\"unix:$tmp/redis.sock\""]);
conf_err('TLS verification of a second sentinel on a unix socket, no ratelimit_redis_ssl_name', <<"EOF",
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% unix:$tmp/sentinel.sock sentinel=m;
ratelimit_redis_ssl on;
ratelimit_redis_ssl_trusted_certificate $pki->{ca};
EOF
    [qr/^\s*ratelimit_redis /], ["\"unix:$tmp/sentinel.sock\""]);
conf_ok('TLS verification of a unix socket against ratelimit_redis_ssl_name', <<"EOF");
ratelimit_redis unix:$tmp/redis.sock;
ratelimit_redis_ssl on;
ratelimit_redis_ssl_trusted_certificate $pki->{ca};
ratelimit_redis_ssl_name redis.test;
EOF
conf_err('missing password_file', <<"EOF", [qr/^\s*ratelimit_redis /], ["$tmp/no-such.pw"]);
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% password_file=$tmp/no-such.pw;
EOF
{
    my $long = write_secret('long.pw', ('L' x 16385) . "\n");
    my $out = conf_err('password_file with a password of 16385 bytes', <<"EOF", [qr/^\s*ratelimit_redis /], [$long]);
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% password_file=$long;
EOF
    like($out, qr/\[emerg\] password_file "\Q$long\E" has a password longer than 16384 bytes, the most Redis takes before AUTH in /,
         'password_file with a password of 16385 bytes: the message says the most');
    $long = write_secret('long-no-newline.pw', 'L' x 20000);
    conf_err('password_file of 20000 bytes, no newline', <<"EOF", [qr/^\s*ratelimit_redis /], ['longer than 16384 bytes']);
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% password_file=$long;
EOF
}
conf_err('password_file that is a directory', <<"EOF", [qr/^\s*ratelimit_redis /], ["$tmp/html"]);
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% password_file=$tmp/html;
EOF

# --- password_file against a Redis with requirepass ---------------------------------

$t->start_redis(requirepass => 'pw-from-file-7Q');

sub run_nginx {
    my ($http) = @_;
    $t->stop_nginx;
    unlink "$tmp/error.log";
    $t->write_conf(fail_policy($http), error_log_level => 'debug');
    my ($st, $out) = $t->nginx_t;
    is($st, 0, 'nginx -t passes') or diag($out);
    eval { $t->start_nginx; 1 } or do { fail("nginx starts: $@"); return undef };
    return $out;
}

{
    my $out = run_nginx("ratelimit_redis 127.0.0.1:%%REDIS_PORT%% password_file=$pwfile timeout=200ms;\n") // '';
    my ($when) = $t->wait_passed('open', 'pwf', 3);
    ok(defined $when, 'password_file: the first line is the password: PASSED');
    my @s = map { $t->req('closed', 'pwf-exact')->{status} } 1 .. 3;
    is("@s", '200 200 429', 'password_file: exact limit');
    is($t->redis_window_total('rl:api:pwf-exact'), 2, 'password_file: counted in redis');
    unlike($t->error_log . $out, qr/pw-from-file-7Q/, 'password_file: the secret is in no log line (debug level)');
}

my $nginx = RateLimitTest::nginx_bin();
my $WITH_DEBUG = `'$nginx' -V 2>&1` =~ /--with-debug/;

# the secrets nginx holds must not show up when Redis refuses them
my %SECRET = (
    file => 'Wr0ng-File-Secret-91',
    inline => 'Wr0ng-Inline-Secret-37',
);
my $badfile = write_secret('bad.pw', "$SECRET{file}\n");
for my $case (['password_file', "password_file=$badfile", $SECRET{file}],
              ['password=', "password=$SECRET{inline}", $SECRET{inline}],
              ['user= password=', "user=nosuchuser password=$SECRET{inline}", $SECRET{inline}]) {
    my ($name, $params, $secret) = @$case;
    my $out = run_nginx("ratelimit_redis 127.0.0.1:%%REDIS_PORT%% $params timeout=200ms connect_timeout=300ms;\n");
    next unless defined $out;
    my $r = $t->req('closed', "bad-$name");
    is($r->{status} . '/' . (rhdr($r, 'X-RL-Status') // '-'), '503/ERROR', "$name refused: fail closed 503 ERROR");
    ok($t->wait_log(qr/ratelimit: redis at "127\.0\.0\.1:\d+" refused AUTH: WRONGPASS/, 1, 3),
        "$name refused: error.log says AUTH was refused");
    sleep 1.2;    # a few reconnects, each one refused
    my @hits = grep { /\Q$secret\E/ } split /\n/, $t->error_log . $out;
    is(scalar @hits, 0, "$name refused: the secret is in no log line (debug level, nginx -t output)")
        or diag(join "\n", @hits[0 .. ($#hits < 4 ? $#hits : 4)]);
    my $dbg = $t->count_log(qr/\[debug\]/);
  SKIP: {
        # A release built without --with-debug logs no debug lines.
        skip "$name refused: nginx has no debug log (--with-debug)", 1
            unless $WITH_DEBUG;
        ok($dbg > 0, "$name refused: the log ran at debug level ($dbg debug lines)");
    }
}

# --- passwords longer than nginx read before: 2000 and 16384 bytes ------------------

for my $len (2000, 16384) {
    my $secret = join '', map { chr(33 + ($_ * 7) % 94) } 1 .. $len;
    $t->stop_nginx;
    $t->stop_redis;
    $t->start_redis(requirepass => $secret);
    my $file = write_secret("long-$len.pw", "$secret\n");
    run_nginx("ratelimit_redis 127.0.0.1:%%REDIS_PORT%% password_file=$file timeout=200ms;\n");
    ok(defined(($t->wait_passed('open', "warm-$len", 3))[0]), "password_file with a password of $len bytes: PASSED");
    my @s = map { $t->req('closed', "long-$len")->{status} } 1 .. 3;
    is("@s", '200 200 429', "password_file with a password of $len bytes: authenticated, the limit holds");
    is($t->redis_window_total("rl:api:long-$len"), 2, "password_file with a password of $len bytes: counted in redis");
}

$t->stop_nginx;
$t->stop_redis;
$t->final_checks;

done_testing;
