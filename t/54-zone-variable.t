#!/usr/bin/perl
# $ratelimit_zone: the zone that decided the request (issue 30).

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use RateLimitTest qw(hdr);

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 1);
$t->start_redis;
$t->write_conf(<<'EOF');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=1s;
ratelimit_zone wide key=$http_x_api_key limit=5 window=60s;
ratelimit_zone tight key=$http_x_api_key limit=2 window=60s;
ratelimit_zone trial key=$http_x_api_key limit=1 window=60s;
ratelimit_zone slot key=$http_x_api_key concurrency=4;
log_format zone '$request_uri $status zone="$ratelimit_zone"';

server {
    listen 127.0.0.1:%%PORT%%;
    access_log %%TMP%%/zone.log zone;
    add_header X-RL-Zone "$ratelimit_zone" always;
    location /two/ { ratelimit zone=wide; ratelimit zone=tight; alias %%TMP%%/html/; }
    location /dry/ { ratelimit zone=trial dry_run; ratelimit zone=wide; alias %%TMP%%/html/; }
    location /slot/ { ratelimit zone=slot; alias %%TMP%%/html/; }
    location /none/ { alias %%TMP%%/html/; }
}
EOF
$t->start_nginx;

sub zones {
    my ($path, $key, $n) = @_;
    my @r = map { $t->get($path, { 'X-Api-Key' => $key }) } 1 .. $n;
    return (join(' ', map { $_->{status} } @r), join(' ', map { hdr($_, 'X-RL-Zone') // '-' } @r));
}

{
    my ($st, $z) = zones('/two/index.html', 'a', 3);
    is($st, '200 200 429', 'two zones: the tighter one rejects the third');
    is($z, 'tight tight tight', 'two zones: the zone with the fewest remaining, then the rejecting one');
}

{
    my ($st, $z) = zones('/dry/index.html', 'b', 2);
    is($st, '200 200', 'dry run: served');
    is($z, 'trial trial', 'dry run: the zone that would have rejected (and the tightest before)');
}

{
    my ($st, $z) = zones('/slot/index.html', 'c', 1);
    is("$st $z", '200 slot', 'a concurrency zone alone: its name');
    ($st, $z) = zones('/none/index.html', 'c', 1);
    is("$st $z", '200 -', 'no zone applied: empty');
    ($st, $z) = zones('/two/index.html', '', 1);
    is("$st $z", '200 -', 'an empty key: no zone applied: empty');
}

{
    my $deadline = time + 2;
    my $log = '';
    while (time < $deadline) {
        $log = RateLimitTest::Env::_read_file($t->tmp . '/zone.log');
        last if ($log =~ tr/\n//) >= 8;
        select(undef, undef, undef, 0.05);
    }
    like($log, qr{^/two/index\.html 429 zone="tight"$}m, 'log_format: the rejecting zone');
    like($log, qr{^/none/index\.html 200 zone="-"$}m, 'log_format: "-" (empty) when none applied');
}

$t->stop_redis;
{
    my ($st, $z) = zones('/two/index.html', 'd', 1);
    is("$st $z", '200 -', 'redis down, fail open: no zone decided: empty');
}

$t->stop_nginx;
$t->no_alerts;

done_testing;
