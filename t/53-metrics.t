#!/usr/bin/perl
# ratelimit_metrics: known traffic gives exactly its counts, summed over two
# workers and kept across a reload of the same zones; a new zone set starts
# afresh; every scrape is read by real parsers (promtool, prometheus_client's
# strict OpenMetrics parser, JSON::PP); scrapes every 100 ms under wrk load
# neither stall nor lose a count.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use POSIX ();
use Time::HiRes qw(time sleep);
use RateLimitTest;

RateLimitTest::require_module();

my $PYTHON = '/usr/bin/python3';    # Debian's, with python3-prometheus-client
my $PARSER = "$FindBin::Bin/lib/metrics_parse.py";
for my $tool ($PYTHON, '/usr/bin/promtool', '/usr/bin/wrk') {
    BAIL_OUT("$tool missing: run ./build.sh") unless -x $tool;
}

my $t = RateLimitTest->new(workers => 2);
$t->start_redis;

sub conf {
    my ($api_limit, $extra_zone) = @_;
    $t->write_conf(<<"CONF");
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=1s;
ratelimit_zone api key=\$http_x_api_key limit=$api_limit window=60s;
ratelimit_zone dz key=\$http_x_api_key limit=1 window=60s;
ratelimit_zone cz key=\$http_x_api_key limit=100 window=60s;
ratelimit_zone big key=\$remote_addr limit=5000 window=60s;
${\ ($extra_zone // '')}
server {
    listen 127.0.0.1:%%PORT%% reuseport;
    location /lim/ { ratelimit zone=api; alias %%TMP%%/html/; }
    location /dry/ { ratelimit zone=dz dry_run; alias %%TMP%%/html/; }
    location /closed/ {
        ratelimit zone=cz;
        ratelimit_fail closed;
        alias %%TMP%%/html/;
    }
    location /load/ { ratelimit zone=big; alias %%TMP%%/html/; }
    location = /metrics { ratelimit_metrics; }
}
CONF
}

sub run_with_stdin {
    my ($input, @cmd) = @_;
    my $in = $t->tmp . '/scrape.in';
    open my $fh, '>', $in or die "$in: $!";
    print {$fh} $input;
    close $fh;
    my $out = `@cmd < $in 2>&1`;
    return ($? >> 8, $out);
}

# One scrape in `format`, parsed by the real parser of that format; returns
# { "name{k=v,...}" => value } with labels in sorted order.
sub scrape {
    my ($format) = @_;
    my %headers = $format eq 'openmetrics'
        ? (Accept => 'application/openmetrics-text; version=1.0.0') : ();
    my $r = $t->get('/metrics', \%headers);
    die "scrape answered $r->{status}" unless $r->{status} == 200;
    my ($rc, $json) = run_with_stdin($r->{content}, $PYTHON, $PARSER, $format);
    die "the $format parser refused the scrape: $json" if $rc;
    my %v;
    for my $s (@{ decode_json($json) }) {
        my ($name, $labels, $value) = @$s;
        my $key = $name . '{' . join(',', map { "$_=$labels->{$_}" }
                                         sort keys %$labels) . '}';
        $v{$key} = $value;
    }
    return (\%v, $r);
}

sub decisions {
    my ($v, $zone) = @_;
    return join ' ', map {
        $v->{"nginx_ratelimit_decisions_total{decision=$_,zone=$zone}"} // 'none'
    } qw(passed rejected rejected_dry_run error error_rejected);
}

sub zone_value {
    my ($v, $name, $zone) = @_;
    return $v->{"nginx_ratelimit_${name}{zone=$zone}"};
}

sub statuses {
    my ($path, $key, $n) = @_;
    return join ' ', map { $t->get($path, { 'X-Api-Key' => $key })->{status} } 1 .. $n;
}

# --- the directive: no parameter, once per location ---------------------------

for my $case (['ratelimit_metrics format=json;', qr/invalid number of arguments in "ratelimit_metrics" directive/],
              ['ratelimit_metrics; ratelimit_metrics;', qr/"ratelimit_metrics" directive is duplicate/])
{
    my ($body, $error) = @$case;
    $t->write_conf("server { listen 127.0.0.1:%%PORT%%;\n"
                   . "location = /metrics { $body }\n}\n");
    my $line = $t->conf_line(qr/location = \/metrics/);
    my ($status, $output) = $t->nginx_t;
    isnt($status, 0, "nginx -t refuses: $body");
    like($output, qr/$error in \S+nginx\.conf:$line/, "  with the file and line")
        or diag($output);
}

conf(4);
$t->start_nginx;

# --- known traffic -------------------------------------------------------------

# Six subjects, five requests each: four pass, the fifth is rejected by
# Redis (no worker has seen the subject rejected yet).
is(statuses('/lim/index.html', "k$_", 5), '200 200 200 200 429', "k$_: 4 passed, 1 rejected")
    for 1 .. 6;
# One flooding subject: four pass, six are rejected, by Redis at most once
# per worker and then from the worker's memory.
is(statuses('/lim/index.html', 'flood', 10), join(' ', ('200') x 4, ('429') x 6),
   'flood: 4 passed, 6 rejected');
is(statuses('/dry/index.html', 'd1', 3), '200 200 200', 'dry run: all three pass');

# Responses are counted in the log phase, after their last byte has left:
# a scrape may come a moment before the worker has logged the last one.
my $v;
RateLimitTest::wait_until(sub {
    ($v) = scrape('openmetrics');
    (zone_value($v, 'successful_responses_total', 'api') // 0) == 28
        && (zone_value($v, 'successful_responses_total', 'dz') // 0) == 3;
}, 2);
is(decisions($v, 'api'), '28 12 0 0 0', 'api: 28 passed, 12 rejected, no errors');
my $hits = zone_value($v, 'deny_cache_hits_total', 'api');
ok($hits >= 4 && $hits <= 5, "api: 4 or 5 of the flood's rejections from memory ($hits)");
is(decisions($v, 'dz'), '1 0 2 0 0', 'dry-run zone: 1 passed, 2 rejected_dry_run');
is(zone_value($v, 'successful_responses_total', 'api'), 28, 'api: 28 successful responses');
is(zone_value($v, 'successful_responses_total', 'dz'), 3, 'dz: 3 successful responses');
is(zone_value($v, 'check_duration_seconds_count', 'api'), 40, 'api: 40 waits observed');
is(zone_value($v, 'zone_limit', 'api'), 4, 'api: limit 4');
is(zone_value($v, 'zone_window_seconds', 'api'), 60, 'api: window 60 s');
ok(zone_value($v, 'busy_seconds_total', 'api') > 0, 'api: busy time counted');
my %pids = map { $_->{pid} => 1 } grep { $_->{uri} =~ m{^/lim/} } $t->access_entries(40);
is(scalar(keys %pids), 2, 'the limited requests were served by both workers');
is($v->{'nginx_ratelimit_redis_connection_state{state=up,worker=0}'}
       + $v->{'nginx_ratelimit_redis_connection_state{state=up,worker=1}'}, 2,
   'both workers connected');
ok($v->{'nginx_ratelimit_redis_calls_total{}'} >= 36
       && $v->{'nginx_ratelimit_redis_calls_total{}'} <= 40,
   'a script call per request not answered from memory');
is($v->{'nginx_ratelimit_redis_requests_per_call_count{}'},
   $v->{'nginx_ratelimit_redis_calls_total{}'}, 'every call in the batch histogram');

# --- the other formats: promtool, and JSON shaped as limit_reqs ------------------

my ($pv, $pr) = scrape('prometheus');
like($pr->{headers}{'content-type'}, qr{^text/plain; version=0\.0\.4}, 'Prometheus text by default');
my ($rc, $out) = run_with_stdin($pr->{content}, '/usr/bin/promtool', 'check', 'metrics');
is($rc, 0, 'promtool check metrics accepts the text format') or diag($out);
is(decisions($pv, 'api'), '28 12 0 0 0', 'the text format says the same');

my $jr = $t->get('/metrics?format=json');
is($jr->{headers}{'content-type'}, 'application/json', 'JSON with ?format=json');
my $j = decode_json($jr->{content});
my $api = $j->{limit_reqs}{api};
is(join(' ', map { $api->{$_} } qw(passed rejected rejected_dry_run error error_rejected)),
   '28 12 0 0 0', 'JSON: the same decisions');
is($api->{successful_responses}, 28, 'JSON: successful responses');
ok($api->{requests_per_second} > 0 && $api->{mean_response_time} > 0,
   "JSON: computed rate ($api->{requests_per_second}/s) and mean response time "
   . "($api->{mean_response_time} s)");
my $mean = zone_value($pv, 'response_time_seconds_total', 'api') / 28;
ok(abs($api->{mean_response_time} - $mean) < 0.0005, 'JSON mean agrees with the counters');

# --- Redis stopped: fail open, fail closed --------------------------------------

$t->stop_redis;
is(statuses('/lim/index.html', 'e1', 2), '200 200', 'Redis down, fail open: passed');
is(statuses('/closed/index.html', 'e2', 3), '503 503 503', 'Redis down, fail closed: 503');
($v) = scrape('openmetrics');
is(decisions($v, 'api'), '28 12 0 2 0', 'api: 2 errors let through');
is(decisions($v, 'cz'), '0 0 0 0 3', 'cz: 3 errors answered 503');
is(zone_value($v, 'successful_responses_total', 'api'), 30, 'errors let through answered 200');
ok($v->{'nginx_ratelimit_redis_errors_total{kind=closed}'}
       + $v->{'nginx_ratelimit_redis_errors_total{kind=connect}'} >= 2,
   'the lost connections counted');

# --- reload with the same zones: kept; with another zone set: afresh --------------

$t->start_redis(port => $t->redis_port);
conf(5);
$t->reload;
my $deadline = time + 5;
($v) = scrape('openmetrics');
while (time < $deadline
       && $v->{'nginx_ratelimit_redis_connection_state{state=up,worker=0}'}
          + $v->{'nginx_ratelimit_redis_connection_state{state=up,worker=1}'} < 2)
{
    sleep 0.1;
    ($v) = scrape('openmetrics');
}
is(decisions($v, 'api'), '28 12 0 2 0', 'reload, same zones: counts kept');
is(zone_value($v, 'zone_limit', 'api'), 5, 'reload: the new limit reported');
is(statuses('/lim/index.html', 'after', 1), '200', 'a request after the reload');
($v) = scrape('openmetrics');
is(decisions($v, 'api'), '29 12 0 2 0', 'counted on top of the kept counts');

conf(5, 'ratelimit_zone extra key=$http_x_api_key limit=1 window=1s;');
$t->reload;
($v) = scrape('openmetrics');
is(decisions($v, 'api'), '0 0 0 0 0', 'reload with another zone set: afresh');
is(decisions($v, 'extra'), '0 0 0 0 0', 'the new zone reported');

# --- under load: wrk on a limited location, a scrape every 100 ms ----------------

my $scrapes = $t->tmp . '/scrapes.txt';
my $scraper = fork // die "fork: $!";
if ($scraper == 0) {
    my $ua = HTTP::Tiny->new(timeout => 5);
    open my $fh, '>', $scrapes or POSIX::_exit(1);
    $fh->autoflush(1);
    my $stop = time + 3.5;
    while (time < $stop) {
        my $t0 = time;
        my $r = $ua->get($t->url('/metrics'));
        printf {$fh} "%s %.4f\n", $r->{status}, time - $t0;
        sleep(0.1);
    }
    POSIX::_exit(0);
}
my $wrk = `/usr/bin/wrk -t 1 -c 20 -d 3s http://127.0.0.1:${\ $t->port}/load/index.html 2>&1`;
waitpid($scraper, 0);
my @s = map { [split] } split /\n/, RateLimitTest::_read_file($scrapes);
my @slow = grep { $_->[0] != 200 || $_->[1] > 1 } @s;
ok(@s >= 20, scalar(@s) . ' scrapes during the load');
is(scalar(@slow), 0, 'every scrape answered 200 within 1 s')
    or diag(join ', ', map { "@$_" } @slow);

my @load = $t->access_entries_for(sub { $_->{uri} =~ m{^/load/} }, 1);
my $served = @load;
my $passed = grep { $_->{status} == 200 } @load;
($v) = scrape('openmetrics');
my ($p, $rj) = split ' ', decisions($v, 'big');
ok($served > 5000, "wrk made $served requests") or diag($wrk);
is($p + $rj, $served, 'every request of the load counted once');
is($p, $passed, 'passed = the 200s of the access log');
is(zone_value($v, 'successful_responses_total', 'big'), $passed,
   'successful responses = the 200s of the access log');

# --- the PromQL of docs/operations.md and the Grafana dashboard parses ---------

{
    my $repo = RateLimitTest::repo_dir();
    my $dashboard = decode_json(RateLimitTest::_read_file("$repo/contrib/grafana-ratelimit.json"));
    my @exprs = map { $_->{expr} } map { @{ $_->{targets} } } @{ $dashboard->{panels} };
    my ($promql) = RateLimitTest::_read_file("$repo/docs/operations.md") =~ /```promql\n(.*?)```/s;
    push @exprs, grep { /\S/ } split /\n\n/, join "\n", grep { !/^#/ } split /\n/, $promql // '';
    ok(@exprs >= 12, scalar(@exprs) . ' expressions in the dashboard and docs/operations.md');
    my $rules = "groups:\n- name: ratelimit\n  rules:\n";
    for my $i (0 .. $#exprs) {
        (my $e = $exprs[$i]) =~ s/\$__rate_interval/5m/g;
        $e =~ s/\$(instance|zone)/.*/g;
        $e =~ s/^[ \t]*/      /mg;
        $rules .= "  - record: ratelimit:expr$i\n    expr: |\n$e\n";
    }
    my $file = $t->tmp . '/rules.yml';
    open my $fh, '>', $file or die "$file: $!";
    print {$fh} $rules;
    close $fh;
    my $out = `/usr/bin/promtool check rules $file 2>&1`;
    my $rc = $? >> 8;
    is($rc, 0, 'promtool check rules parses every expression') or diag("$out\n$rules");
}

$t->no_alerts;
done_testing;
