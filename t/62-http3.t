#!/usr/bin/perl
# Requests over HTTP/3 (QUIC) are limited as any others: an nginx built
# with --with-http_v3_module (1.25 and later; ./build.sh with NGINX_VERSION)
# and Debian's ngtcp2 client, gtlsclient.  Skipped for an nginx without
# HTTP/3, such as Debian's 1.22.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use RateLimitTest;
use TestCerts;

RateLimitTest::require_module();

my $nginx = RateLimitTest::nginx_bin();
plan skip_all => "$nginx has no HTTP/3 (--with-http_v3_module)"
    unless `'$nginx' -V 2>&1` =~ /--with-http_v3_module/;
my ($client) = grep { -x } '/usr/bin/gtlsclient';
plan skip_all => 'no HTTP/3 client (apt-get install ngtcp2-client)'
    unless $client;

my $t = RateLimitTest->new(workers => 1);
my $pki = TestCerts->new($t->tmp . '/pki');
$t->start_redis;
$t->write_conf(<<"EOF");
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=1s;
ratelimit_zone h3 key=\$remote_addr limit=2 window=60s;
log_format h3 '\$server_protocol \$status rs=\$ratelimit_status';

server {
    listen 127.0.0.1:%%PORT%% quic;
    listen 127.0.0.1:%%PORT%% ssl;  # TCP too: the harness waits for it
    ssl_certificate $pki->{server_chain};
    ssl_certificate_key $pki->{server_key};
    access_log %%TMP%%/h3.log h3;

    location /h3/ {
        ratelimit zone=h3;
        alias %%TMP%%/html/;
    }
}
EOF
$t->start_nginx;

# One request per connection, one after the other: the order is known.
my @status;
for my $i (1 .. 3) {
    my $url = 'https://127.0.0.1:' . $t->port('PORT') . '/h3/a.html';
    my $out = `'$client' --exit-on-all-streams-close --no-quic-dump 127.0.0.1 @{[ $t->port('PORT') ]} '$url' 2>&1`;
    my ($st) = $out =~ /^\[?[^\n]*?:status:\s*(\d{3})/m;
    push @status, $st // 'none';
    diag("gtlsclient: $out") unless defined $st;
}

is("@status", '200 200 429', 'HTTP/3: limit 2, the third request rejected');
my $log = $t->tmp . '/h3.log';
my $lines = sub { my $l = -f $log ? RateLimitTest::_read_file($log) : ''; $l };
RateLimitTest::wait_until(sub { (() = $lines->() =~ /\n/g) >= 3 }, 5);
my @log = split /\n/, $lines->();
is(join(',', @log), 'HTTP/3.0 200 rs=PASSED,HTTP/3.0 200 rs=PASSED,'
    . 'HTTP/3.0 429 rs=REJECTED', 'HTTP/3: logged as HTTP/3.0 requests');

$t->stop_all;
done_testing();
