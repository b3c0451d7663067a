#!/usr/bin/perl
# Changing a zone's bucket= (or algorithm=) on reload (issue 30): the
# window script starts afresh a key written under another bucket length,
# so the reload warns at the zone's line; the counts do start afresh.
# `nginx -t` has no running configuration to compare with: no warning.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use RateLimitTest qw(hdr);

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 1);
$t->start_redis;

sub conf {
    my ($zone) = @_;
    $t->write_conf(<<"EOF" . <<'EOF');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=1s;
ratelimit_zone b key=\$http_x_api_key limit=2 window=60s $zone;
ratelimit_zone same key=\$http_x_api_key limit=2 window=60s bucket=1s;
EOF
server {
    listen 127.0.0.1:%%PORT%%;
    location /b/ { ratelimit zone=b; alias %%TMP%%/html/; }
    location /same/ { ratelimit zone=same; alias %%TMP%%/html/; }
}
EOF
}

sub statuses {
    my ($loc, $n) = @_;
    return join ' ', map { $t->get("/$loc/index.html", { 'X-Api-Key' => 'k' })->{status} } 1 .. $n;
}

conf('bucket=1s');
$t->start_nginx;
is(statuses('b', 3), '200 200 429', 'bucket=1s: the third request rejected');
is(statuses('same', 3), '200 200 429', 'zone "same": the third request rejected');

conf('bucket=100ms');
my ($st, $out) = $t->nginx_t;
is($st, 0, 'nginx -t passes');
unlike($out, qr/changed its bucket/, 'nginx -t: nothing to compare with, no warning');

$t->reload;
my $line = $t->conf_line(qr/ratelimit_zone b /);
is($t->wait_log(qr/\[warn\] .*zone "b" changed its bucket from 1000 ms to 100 ms: its counts in Redis start afresh; to keep them, give the new one another name and switch once its window has passed in \S*nginx\.conf:$line\b/, 1), 1,
    'reload: the change of bucket= is warned of, at the zone\'s line');
is($t->count_log(qr/zone "same" changed/), 0, 'reload: an unchanged zone is not');
is(statuses('b', 1), '200', 'after the reload: the counts of zone "b" started afresh');
is(statuses('same', 1), '429', 'after the reload: zone "same" kept its counts');

conf('algorithm=fixed');
$t->reload;
is($t->wait_log(qr/\[warn\] .*zone "b" changed its algorithm from sliding to fixed: its counts/, 1), 1,
    'reload: a change of algorithm= is warned of');

$t->stop_nginx;
$t->no_alerts;

done_testing;
