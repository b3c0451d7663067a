#!/usr/bin/perl
# Dry run: "ratelimit zone=x dry_run;" and "ratelimit_dry_run on;".

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
ratelimit_zone d1 key=$http_x_api_key limit=2 window=60s;
ratelimit_zone d2 key=$http_x_api_key limit=2 window=60s;
ratelimit_zone d3 key=$http_x_api_key limit=2 window=60s;
ratelimit_zone d4 key=$http_x_api_key limit=2 window=60s;
ratelimit_zone d5 key=$http_x_api_key limit=2 window=60s;
ratelimit_zone m1 key=$http_x_api_key limit=1 window=60s;
ratelimit_zone d6 key=$http_x_api_key limit=1 window=60s;
ratelimit_zone m2 key=$http_x_api_key limit=3 window=60s;

server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    location /dr1/ { ratelimit zone=d1 dry_run; alias %%TMP%%/html/; }
    location /dr2/ { ratelimit_dry_run on; ratelimit zone=d2; alias %%TMP%%/html/; }
    location /enf/ { ratelimit zone=d3; alias %%TMP%%/html/; }
    location /mix/ { ratelimit zone=m1 dry_run; ratelimit zone=m2; alias %%TMP%%/html/; }
    location /drw/ { ratelimit zone=d6 dry_run; ratelimit_log_level warn; alias %%TMP%%/html/; }
}

server {
    listen 127.0.0.1:%%PORT2%%;
    add_header X-RL-Status "$ratelimit_status" always;
    ratelimit_dry_run on;
    location /srv/ { ratelimit zone=d4; alias %%TMP%%/html/; }
    location /off/ { ratelimit_dry_run off; ratelimit zone=d5; alias %%TMP%%/html/; }
}
EOF
$t->start_nginx;

sub run {
    my ($path, $n, $port) = @_;
    my @r = map { $t->get($path, { 'X-Api-Key' => 'dk' }, $port ? (port => $port) : ()) } 1 .. $n;
    return (join(' ', map { $_->{status} } @r), join(' ', map { hdr($_, 'X-RL-Status') // '-' } @r), \@r);
}

{
    my ($st, $rs, $r) = run('/dr1/a.html', 5);
    is($st, '200 200 200 200 200', 'zone=.. dry_run: over-limit requests pass');
    is($rs, 'PASSED PASSED REJECTED_DRY_RUN REJECTED_DRY_RUN REJECTED_DRY_RUN',
        'zone=.. dry_run: $ratelimit_status');
    ok(!(grep { $_->{content} ne "page a\n" } @$r), 'zone=.. dry_run: content served');
    ok(!(grep { defined hdr($_, 'Retry-After') } @$r), 'dry run: no Retry-After');
    is(join(' ', map { hdr($_, 'X-RateLimit-Remaining') // '-' } @$r), '1 0 - - -',
        'dry run: a request the zone would have rejected has no X-RateLimit-Remaining');
    is(join(' ', map { defined hdr($_, 'RateLimit') ? 'y' : '-' } @$r), 'y y - - -',
        'dry run: nor RateLimit (no r=0 told to a client it serves)');
    ok(!(grep { defined hdr($_, 'RateLimit-Policy') || defined hdr($_, 'X-RateLimit-Limit') }
         @{$r}[2 .. 4]), 'dry run: nor RateLimit-Policy, X-RateLimit-Limit');
    is($t->wait_log(qr/limiting requests, dry run, by zone "d1"/, 3), 3, 'dry run: 3 "dry run" log lines');
    is($t->count_log(qr/limiting requests by zone "d1"/), 0, 'dry run: no plain "limiting requests" line');

    my @e = $t->access_entries_for('/dr1/a.html', 5);
    is(join(' ', map { $_->{rs} } @e), $rs, 'dry run: $ratelimit_status in access log');
}

{
    my ($st, $rs) = run('/dr2/a.html', 4);
    is($st, '200 200 200 200', 'ratelimit_dry_run on: over-limit requests pass');
    is($rs, 'PASSED PASSED REJECTED_DRY_RUN REJECTED_DRY_RUN', 'ratelimit_dry_run on: $ratelimit_status');
    is($t->wait_log(qr/limiting requests, dry run, by zone "d2"/, 2), 2, 'ratelimit_dry_run on: logged as dry run');
}

{
    my ($st, $rs) = run('/enf/a.html', 4);
    is($st, '200 200 429 429', 'no dry run: enforced');
    is($rs, 'PASSED PASSED REJECTED REJECTED', 'no dry run: $ratelimit_status');
}

{
    my ($st, $rs) = run('/srv/a.html', 4, $t->port('PORT2'));
    is($st, '200 200 200 200', 'server-level ratelimit_dry_run on inherited');
    is($rs, 'PASSED PASSED REJECTED_DRY_RUN REJECTED_DRY_RUN', 'server-level dry run: $ratelimit_status');
    ($st, $rs) = run('/off/a.html', 4, $t->port('PORT2'));
    is($st, '200 200 429 429', 'location ratelimit_dry_run off overrides server on');
    is($rs, 'PASSED PASSED REJECTED REJECTED', 'dry run off: $ratelimit_status');
}

{
    # m1 (limit 1) is dry run, m2 (limit 3) is enforced
    my ($st, $rs) = run('/mix/a.html', 5);
    is($st, '200 200 200 429 429', 'dry-run zone + enforced zone: only the enforced one rejects');
    is($rs, 'PASSED REJECTED_DRY_RUN REJECTED_DRY_RUN REJECTED REJECTED', 'mixed: $ratelimit_status');
}

{
    my ($st) = run('/drw/a.html', 2);
    is($st, '200 200', 'dry run with ratelimit_log_level warn: passes');
    is($t->wait_log(qr/\[warn\] .*limiting requests, dry run, by zone "d6"/, 1), 1,
        'dry run line logged at ratelimit_log_level');
}

$t->stop_nginx;
$t->no_alerts;

done_testing;
