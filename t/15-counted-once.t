#!/usr/bin/perl
# A request is counted once, whatever internal redirects and subrequests it makes.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use RateLimitTest qw(parse_ratelimit hdr);

RateLimitTest::require_module();

my $t = RateLimitTest->new(workers => 1);
$t->write_html('ssi/page.html',
    "<p>start</p>\n"
    . qq{<!--# include virtual="/lim/x.html" -->\n} x 3
    . qq{<!--# include virtual="/lim2/x.html" -->\n}
    . "<p>end</p>\n");
$t->write_html('tf/real.html', "real\n");
$t->write_html('too.html', "slow down\n");

$t->start_redis;
$t->write_conf(<<'EOF');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=1s;
ratelimit_zone api key=$http_x_api_key limit=3 window=60s;
ratelimit_zone other key=$http_x_api_key limit=3 window=60s;

server {
    listen 127.0.0.1:%%PORT%%;
    add_header X-RL-Status "$ratelimit_status" always;
    root %%TMP%%/html;

    # try_files -> named location
    location /tf/ {
        ratelimit zone=api;
        try_files /nonexistent @named;
    }
    location @named {
        ratelimit zone=api;
        rewrite ^ /a.html break;
    }

    # try_files -> uri fallback (internal redirect to a limited location)
    location /tf2/ {
        ratelimit zone=api;
        try_files /nonexistent /lim/b.html;
    }

    # error_page internal redirect
    location /ep/ {
        ratelimit zone=api;
        error_page 404 = /lim/a.html;
    }

    # rewrite ... last (internal redirect)
    location /rw/ {
        ratelimit zone=api;
        rewrite ^/rw/(.*)$ /lim/$1 last;
    }

    # SSI with subrequests into limited locations
    location /ssi/ {
        ratelimit zone=api;
        ssi on;
    }

    # auth_request subrequest into a limited location
    location /ar/ {
        ratelimit zone=api;
        auth_request /auth;
        alias %%TMP%%/html/;
    }
    location = /auth {
        ratelimit zone=api;
        proxy_pass http://127.0.0.1:%%PORT2%%/ok.html;
        proxy_pass_request_body off;
        proxy_set_header Content-Length "";
    }

    # custom error page for 429 served from a limited location
    location /e429/ {
        ratelimit zone=api;
        error_page 429 /lim/too.html;
        alias %%TMP%%/html/;
    }

    # unlimited location redirecting into a limited one: counted once there
    location /u/ {
        try_files /nonexistent /lim/a.html;
    }

    location /lim/  { ratelimit zone=api; alias %%TMP%%/html/; }
    # a subrequest into a location limited by another zone
    location /lim2/ { ratelimit zone=other; alias %%TMP%%/html/; }
}

server {
    listen 127.0.0.1:%%PORT2%%;
    root %%TMP%%/html;
}
EOF
$t->start_nginx;

sub check {
    my ($path, $key, $content) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my @r = map { $t->get($path, { 'X-Api-Key' => $key }) } 1 .. 4;
    is(join(' ', map { $_->{status} } @r), '200 200 200 429', "$path: 3 admitted, 4th rejected");
    is(join(' ', map { hdr($_, 'X-RateLimit-Remaining') // '-' } @r), '2 1 0 0',
        "$path: remaining decreases by one per request");
    is($r[0]{content}, $content, "$path: content") if defined $content;
    is(hdr($r[0], 'X-RL-Status'), 'PASSED', "$path: \$ratelimit_status PASSED");
    is($t->redis_window_total("rl:api:$key"), 3, "$path: redis counts 3");
    my $w = $t->count_log(qr/limiting requests by zone "api", key "\Q$key\E"/);
    is($w, 1, "$path: one log line for the one rejection");
    return @r;
}

check('/tf/x', 'tf', "page a\n");
check('/tf2/x', 'tf2', "page b\n");
check('/ep/missing.html', 'ep', "page a\n");
check('/rw/a.html', 'rw', "page a\n");

{
    my @r = check('/ssi/page.html', 'ssi');
    my $c = $r[0]{content};
    my $n = () = $c =~ /\[x\]/g;
    is($n, 4, 'ssi: all 4 includes rendered') or diag($c);
    like($c, qr/start.*end/s, 'ssi: page complete');
    is($t->redis('EXISTS', 'rl:other:ssi'), 0, 'ssi: subrequest into another zone not counted there');
    # requests 2 and 3 also rendered everything (subrequests are not limited)
    ok(!(grep { (() = $_->{content} =~ /\[x\]/g) != 4 } @r[0 .. 2]), 'ssi: includes rendered in every admitted page');
}

{
    check('/ar/index.html', 'ar', "index page\n");
}

# error_page 429 -> page in a limited location: still 429 with the custom
# page, and neither the rejected request nor its error page is counted
{
    my @r = map { $t->get('/e429/a.html', { 'X-Api-Key' => 'e429' }) } 1 .. 5;
    is(join(' ', map { $_->{status} } @r), '200 200 200 429 429', 'error_page 429: statuses');
    is($r[3]{content}, "slow down\n", 'error_page 429: custom page served');
    is($t->redis_window_total('rl:api:e429'), 3, 'error_page 429: redis counts 3');
}

# from an unlimited location into a limited one: the limit applies once
check('/u/x', 'u', "page a\n");

# direct request into the subrequest location still counts normally
{
    my $r = $t->get('/lim/x.html', { 'X-Api-Key' => 'direct' });
    is(hdr($r, 'X-RateLimit-Remaining'), 2, 'direct request: counted');
    is($t->redis_window_total('rl:api:direct'), 1, 'direct request: redis counts 1');
}

$t->stop_nginx;
$t->no_alerts;

done_testing;
