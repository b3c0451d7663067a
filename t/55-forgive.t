#!/usr/bin/perl
# Forgiving a subject (issue 30): DELETE on the status API where
# `ratelimit_query ... delete=on` allows it.  Two nginx servers of two
# workers each, one Redis: a subject every worker remembers rejecting is
# forgiven by one DELETE and passes on every worker of both servers.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use HTTP::Tiny;
use Time::HiRes qw(time sleep);
use RateLimitTest qw(hdr);

RateLimitTest::require_module();

my $t  = RateLimitTest->new(workers => 2);
my $t2 = RateLimitTest->new(workers => 2);
$t->start_redis;
my $REDIS_PORT = $t->redis_port;

my $conf = <<"EOF" . <<'EOF';
ratelimit_redis 127.0.0.1:$REDIS_PORT timeout=1s;
EOF
ratelimit_zone z key=$http_x_api_key limit=30 window=60s;
ratelimit_zone c key=$http_x_api_key concurrency=2;
server {
    listen 127.0.0.1:%%PORT%% reuseport;
    location /z/ { ratelimit zone=z; alias %%TMP%%/html/; }
    location = /q { ratelimit_query zone=z zone=c delete=on; }
    location = /ro { ratelimit_query zone=z; }
}
EOF
$t->write_conf($conf);
$t2->write_conf($conf);
$t->start_nginx;
$t2->start_nginx;
my @SERVERS = ($t, $t2);

sub del {
    my ($srv, $path) = @_;
    return HTTP::Tiny->new(timeout => 5)->request('DELETE', $srv->url($path));
}

# Requests of subject $key, $n on each server; returns { pid => [statuses] }
# of those requests, from each server's access log.
sub round {
    my ($key, $n) = @_;
    my %by_pid;
    for my $srv (@SERVERS) {
        my $before = () = grep { $_->{uri} eq '/z/index.html' } $srv->access_entries;
        $srv->get('/z/index.html', { 'X-Api-Key' => $key }) for 1 .. $n;
        my @e = $srv->access_entries_for(sub { $_->{uri} eq '/z/index.html' }, $before + $n);
        push @{ $by_pid{ $_->{pid} } }, $_->{status} for @e[$before .. $#e];
    }
    return \%by_pid;
}

# --- every worker of both servers remembers rejecting "s" ---------------------

my %seen_429;
for (1 .. 6) {
    my $r = round('s', 20);
    for my $pid (keys %$r) {
        $seen_429{$pid} = 1 if grep { $_ == 429 } @{ $r->{$pid} };
    }
    last if keys %seen_429 == 4;
}
is(scalar(keys %seen_429), 4, 'every worker of both servers rejected "s" (and remembers it)');

# --- DELETE without delete=on, and bad ones -----------------------------------

is(del($t, '/ro?zone=z&key=s')->{status}, 405, 'DELETE where delete=on is not given: 405');
my $bad = del($t, '/q?key=s');
is($bad->{status}, 400, 'DELETE without zone=: 400');
like($bad->{content}, qr/missing zone/, 'DELETE without zone=: says so');
is(del($t, '/q?zone=nope&key=s')->{status}, 400, 'DELETE of a zone not queried here: 400');
like(del($t, '/q?zone=c&key=s')->{content}, qr/concurrency zone/, 'DELETE in a concurrency zone: 400, nothing to forgive');
is(del($t, '/q?zone=z')->{status}, 400, 'DELETE without key=: 400');
is($t->get('/q?key=s')->{status}, 200, 'GET on a delete=on location still reports');

# --- one DELETE forgives "s" everywhere ----------------------------------------

my $d = del($t, '/q?zone=z&key=s');
is($d->{status}, 204, 'DELETE ?zone=z&key=s: 204');
is($d->{content} // '', '', '204: no body');
is($t->wait_log(qr/\[notice\] .*ratelimit: zone "z", key "s" forgiven, 4 workers told/, 1), 1,
    'logged at notice, the message reached the 4 workers');
is($t->redis('EXISTS', 'rl:z:s'), 0, 'the key is gone from Redis');
sleep 0.1;    # the message reaches the workers as the reply reaches the client

my %first;
for (1 .. 3) {
    my $r = round('s', 6);
    for my $pid (keys %$r) {
        $first{$pid} //= $r->{$pid}[0];
    }
    last if keys %first == 4;
}
is(scalar(keys %first), 4, 'every worker of both servers asked again');
is(join(' ', map { $first{$_} } sort keys %first), '200 200 200 200',
    'every worker admits "s" at once after the DELETE');

$_->stop_nginx for @SERVERS;
$_->no_alerts for @SERVERS;

done_testing;
