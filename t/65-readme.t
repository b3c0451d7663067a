#!/usr/bin/perl
# The README's quick start as a new user runs it: its blocks marked
# <!-- quickstart:page --> (if any), <!-- quickstart:conf --> and
# <!-- quickstart:requests --> are taken from README.md as written and run
# against a real nginx (the module under test) and a real redis-server.
# The output must be what the README says it is: 200 five times, then 429.
#
# Rewritten, and nothing else: the Redis port 6379 and the server's port
# 8080 become the test's free ports, and the page's folder /var/www/ratelimit
# one in the test's temporary folder.  The conf block goes into the http{}
# block, as Debian's nginx.conf includes conf.d/, after the load_module
# line; the harness's nginx -t and start stand for `nginx -t && nginx -s
# reload`.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use RateLimitTest;

my $readme = RateLimitTest::Env::_read_file(RateLimitTest::Env::repo_dir() . '/README.md');
my %block;
while ($readme =~ /^<!-- quickstart:(\w+) -->\n```\w*\n(.*?)^```\n(.*?)(?=^#|^<!--|\z)/msg) {
    $block{$1} = { code => $2, after => $3 };
}
for my $name (qw(conf requests)) {
    ok($block{$name}, "README.md has a <!-- quickstart:$name --> block") or do { done_testing; exit 1 };
}
my ($promise) = $block{requests}{after} =~ /^prints (.*?)\./m;
is($promise, '`200` five times, then `429` twice', 'the README promises 200 five times, then 429');

my $t = RateLimitTest->new(workers => 1);
$t->start_redis;
my $port = $t->port('PORT');
my $www = $t->tmp . '/www/ratelimit';
my %rewrite = (6379 => $t->redis_port, 8080 => $port, '/var/www/ratelimit' => $www);
my $re = join '|', map { quotemeta } sort keys %rewrite;
my %run = map { $_ => $block{$_}{code} =~ s/(?<![\w.])($re)(?!\w)/$rewrite{$1}/gr }
    keys %block;

is(system('sh', '-e', '-c', $run{page}), 0, 'the page block runs') if $run{page};
$t->write_conf($run{conf});
my ($st, $out) = $t->nginx_t;
is($st, 0, 'the conf block passes nginx -t') or diag($out);
$t->start_nginx;
open my $fh, '-|', 'sh', '-e', '-c', $run{requests} or die "sh: $!";
my $codes = do { local $/; <$fh> };
close $fh;
is($codes =~ tr/\n/ /r, '200 200 200 200 200 429 429 ', 'the requests block prints 200 five times, then 429');
is(scalar(my @keys = $t->redis_keys('rl:per_ip:*')), 1, 'counted in the Redis, one key for the client');
$t->stop_nginx;
$t->no_alerts;

done_testing;
