#!/usr/bin/perl
# The Redis module's command on a master and its replica: the command leaves
# out the copies of its writes only while nothing would receive them (no
# replica, no backlog, the AOF off: redis_module/command/propagation.hpp), and
# replicates again from the call after a SYNC or PSYNC.
#
# Expected: sliding, fixed and GCRA keys written by batches of the command
# (64 requests, 200 subjects a zone; the windows' as hashes and as packed
# strings, changed in place and copied as SETRANGE, or made anew and
# copied as SET ... PXAT; and keys written in one layout, then in the
# other: hashes made strings, copied as SET ... PXAT, strings made hashes,
# copied as DEL, HSET and PEXPIREAT), first with no replica, then with a
# replica attached (it asked with SYNC/PSYNC after the master had settled on
# "nothing listens"), then with the replica's link cut and writes made
# while it is away (it comes back with PSYNC, from the backlog): once the
# replica has caught up, every key of the master is on it with the same
# type, fields, values and expiry time, and it has no other.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use RateLimitTest;
use RateLimitTest::Redis qw(redis_at);

RateLimitTest::redis_module_so() or plan skip_all => 'redis module not built';

my $t = RateLimitTest->new;
$t->start_redis(redis_module => 1, args => ['--repl-diskless-sync-delay', '0']);
my $MP = $t->redis_port;
my $RP = $t->port('REPLICA');
my $replica = { port => $RP };

srand(39);

# One call of 64 requests of one zone: "s" sliding (1 s buckets, 60 of
# them), "f" fixed, "g" GCRA (a window of 60 s, so its keys outlive the
# test); "S" and "F" sliding and fixed with new keys packed strings (the
# number of zones "1p"); "m" and "M" sliding, "n" and "N" fixed, with new
# keys as `layout` says ("p" strings, "h" hashes); the limits far above
# what is sent.
sub batch {
    my ($kind, $layout) = @_;
    my @keys = map { "rl39:$kind:" . int(rand(200)) } 1 .. 64;
    my @zone = $kind eq 'g' ? (1000000, 60000, 1, 'g', '1')
             : (1000000, 1000, 60, $kind =~ /[fFnN]/ ? 'f' : 's', '1');
    my $zones = 1 . ($layout // ($kind =~ /[SF]/ ? 'p' : ''));
    my $r = $t->redis('RATELIMIT.DECIDE', scalar @keys, @keys, $zones, @zone, ("c\0") x 64);
    die "RATELIMIT.DECIDE: $$r\n" if ref $r ne 'ARRAY';
    return $r;
}

# `rounds` batches of each zone, then the keys of "m" and "n" written as
# hashes then as strings (made strings), those of "M" and "N" as strings
# then as hashes (made hashes).
sub batches {
    batch($_) for map { ('s', 'f', 'g', 'S', 'F') } 1 .. $_[0];
    batch(@$_) for [m => 'h'], [m => 'p'], [n => 'h'], [n => 'p'],
                   [M => 'p'], [M => 'h'], [N => 'p'], [N => 'h'];
}

sub info_field {
    my ($port, $name) = @_;
    my $info = redis_at({ port => $port }, 'INFO', 'replication');
    return $info =~ /^$name:(\S+)/m ? $1 : '';
}

sub wait_for {
    my ($what, $ok) = @_;
    my $deadline = time + 10;
    until ($ok->()) {
        die "timed out waiting for $what\n" if time > $deadline;
        sleep 0.05;
    }
}

# Every key as one line: name, type, fields and values (or the value), and
# PEXPIRETIME; sorted.
my $DUMP = <<'LUA';
local out = {}
for _, k in ipairs(redis.call('KEYS', 'rl39:*')) do
  local t = redis.call('TYPE', k).ok
  local v = t == 'hash' and table.concat(redis.call('HGETALL', k), ' ')
            or redis.call('GET', k)
  out[#out + 1] = k .. ' ' .. t .. ' ' .. v .. ' ' .. redis.call('PEXPIRETIME', k)
end
table.sort(out)
return out
LUA

batches(3);
is(info_field($MP, 'repl_backlog_active'), '0', 'written with no replica and no backlog');

$t->start_redis_server(name => 'replica', port => $RP,
    args => ['--replicaof', '127.0.0.1', $MP]);
wait_for('the replica link', sub { info_field($RP, 'master_link_status') eq 'up' });
batches(3);

is($t->redis('CLIENT', 'KILL', 'TYPE', 'replica'), 1, "the replica's link cut");
batches(3);

wait_for('the replica to catch up', sub {
    info_field($RP, 'master_link_status') eq 'up'
        && info_field($MP, 'master_repl_offset') eq info_field($RP, 'slave_repl_offset');
});

my $on_master = $t->redis('EVAL', $DUMP, 0);
my $on_replica = redis_at($replica, 'EVAL', $DUMP, 0);
cmp_ok(scalar @$on_master, '>=', 5 * 150, 'the master holds keys of the five zones');
is(scalar(grep { /^rl39:[SF]:\d+ string / } @$on_master), scalar(grep { /^rl39:[SF]:/ } @$on_master),
   'the packed zones\' keys are strings');
ok((grep { /^rl39:[mn]:\d+ string / } @$on_master) && (grep { /^rl39:[MN]:\d+ hash / } @$on_master),
   'keys written last in the other layout are in it');
is_deeply($on_replica, $on_master, 'the replica holds the same keys, values and expiry times');

done_testing;
