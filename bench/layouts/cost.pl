#!/usr/bin/perl
# Redis's cost per decided request of a window's layout (issue 40): Redis
# instructions (callgrind, which load does not change) and the commands
# Redis ran (INFO commandstats), for today's hash through the window script
# and the Redis module's command, and for the candidates of this folder: a
# packed string through packed.lua (script_set: every write a SET;
# script_range: a count in the newest bucket a SETRANGE) and
# proto_command.cpp (built here against redis_module/api/).
#
#   perl -I t/lib bench/layouts/cost.pl CASE SCENARIO [PER_CALL] [SUBJECTS]
#
# CASE: script_hash, command_hash (the module's script and command, from
# this tree: build/ratelimit_redis.so; LAYOUT=p in the environment asks
# them for packed new keys, the default hashes), script_set, script_range,
# command_packed, command_packed_inplace (a new bucket grows the string in
# place), incr (the floor: PER_CALL INCRs pipelined).
# SCENARIO, each request a counted request of one zone, limit 10^9, on a
# key of its own (SUBJECTS, default 2048, each counted once while
# measured):
#   same   the key's newest bucket is the current one (1 h buckets, 2 a
#          window), its only one
#   mix7   the same with 7 live buckets (the bench's mix: 6 to 7), made by
#          a script (SET: an embedded string the command's first write
#          unshares)
#   new    the key's newest bucket is the one before (1 s buckets, 60)
#   fresh  no key
#   fixed  a fixed window of 1 h, counted in before
#   calendar  a calendar zone's day (UTC: the period ends it is sent are
#          the next two midnights), counted in before (script_hash and
#          command_hash only)
# PER_CALL (default 16): requests a call.  Prints one line: instructions a
# request from the moment the counters were zeroed to the dump (the calls,
# their reading and replies), commands a request, and MEMORY USAGE of the
# first key after.  SIDE=1 in the environment: the zone is of side mode
# (issue 41), its marker key absent; SIDE=2: its marker set, so that each
# request reads its side key, none of which is set; and BAN=D: the zone
# bans for D ms (issue 43; no ban is set, nothing is refused).  Runs
# redis-server under valgrind: seconds, not minutes, and wall-clock figures
# mean nothing here.

use strict;
use warnings;

use FindBin qw($Bin);
use File::Temp qw(tempdir);
use lib $Bin;
use CallgrindRedis;
use Time::HiRes qw(sleep time);
use RateLimitTest::Env qw(window_script);

my ($CASE, $SCENARIO, $PER_CALL, $SUBJECTS) = @ARGV;
die "usage: $0 CASE SCENARIO [PER_CALL] [SUBJECTS]\n" unless $SCENARIO;
die "$0: no scenario $SCENARIO\n"
    unless $SCENARIO =~ /^(?:same|mix7|new|fresh|fixed|calendar)$/;
die "$0: calendar is for script_hash and command_hash\n"
    if $SCENARIO eq 'calendar' && $CASE !~ /^(?:script|command)_hash$/;
$PER_CALL ||= 16;
$SUBJECTS ||= 2048;
my $ROOT = "$Bin/../..";
my $dir = tempdir('layout-cost-XXXXXX', TMPDIR => 1, CLEANUP => 1);

my $proto = "$dir/proto.so";
system('g++', '-O2', '-g', '-fPIC', '-shared', '-std=c++17',
       "-I$ROOT/redis_module", "-I$ROOT/src", "$Bin/proto_command.cpp",
       "$ROOT/redis_module/api/redis_module_api.cpp", '-o', $proto) == 0
    or die "proto_command.cpp did not build\n";

my $redis = CallgrindRedis->start(
    '--loadmodule', "$ROOT/build/ratelimit_redis.so", '--loadmodule', $proto,
    $CASE eq 'command_packed_inplace' ? 'inplace' : ());

sub slurp {
    open my $fh, '<', $_[0] or die "$_[0]: $!\n";
    local $/;
    return scalar <$fh>;
}

my $packed = slurp("$Bin/packed.lua");
(my $packed_set = $packed) =~ s/^local in_place = true$/local in_place = false/m
    or die "packed.lua: no 'local in_place = true'\n";
my %sha = (
    script_hash  => $redis->command('SCRIPT', 'LOAD', window_script()),
    script_set   => $redis->command('SCRIPT', 'LOAD', $packed_set),
    script_range => $redis->command('SCRIPT', 'LOAD', $packed),
);
my $DAY_MS = 86400000;
my $midnight = (int(time * 1000 / $DAY_MS) + 1) * $DAY_MS;
my ($BUCKET_MS, $SPAN, $KIND) =
    $SCENARIO eq 'new'   ? (1000, 60, 's')
  : $SCENARIO eq 'fixed' ? (3600000, 1, 'f')
  : $SCENARIO eq 'calendar' ? ($midnight, $midnight + $DAY_MS, 'c')
  : $SCENARIO eq 'mix7'  ? (3600000, 60, 's')
  :                        (3600000, 2, 's');
my $LIMIT = 1_000_000_000;
my $SIDE = $ENV{SIDE} // 0;
die "$0: SIDE= is for script_hash and command_hash\n"
    if $SIDE && $CASE !~ /^(?:script|command)_hash$/;
my $MARKER = 'rl:z60+';
my $BAN = $ENV{BAN} // 0;
die "$0: BAN= is for SIDE=1 or 2\n" if $BAN && !$SIDE;
my @ZONE = ($LIMIT, $BUCKET_MS, $SPAN, $KIND,
            $BAN ? "4$BAN:$MARKER" : $SIDE ? "3$MARKER" : '1');
$redis->command('ZADD', $MARKER, 0, 'none') if $SIDE == 2;

# One call of a request per key (the entries are the window script's; the
# candidates' scripts and command count 1 a key whatever they say).
sub decide {
    my @keys = @_;
    my $n = @keys;
    my @zone = ('1' . ($SIDE ? uc($ENV{LAYOUT} // 'h')
                              : $ENV{LAYOUT} // ''), @ZONE);
    push @keys, $MARKER if $SIDE;
    if ($CASE eq 'incr') {
        $redis->send_raw(join '', map { $redis->request('INCR', $_) } @keys);
        $redis->reply for @keys;
        return;
    }
    my $r = $CASE eq 'command_hash'
        ? $redis->command('RATELIMIT.DECIDE', scalar @keys, @keys, @zone,
                          ("c\0") x $n)
      : $CASE =~ /^command_packed/
        ? $redis->command('PROTO.DECIDE', $LIMIT, $BUCKET_MS, $SPAN, $KIND,
                          @keys)
      : $redis->command('EVALSHA', $sha{$CASE} // die("no case $CASE\n"),
                scalar @keys, @keys, @zone, ("c\0") x $n);
    die "not a decision: @$r\n"
        unless @$r == 1 + 4 * $n && !grep { $r->[1 + 4 * $_] } 0 .. $n - 1;
}

my @subjects = map { "rl:z60:k$_" } 1 .. $SUBJECTS;

sub each_once {
    my ($prefix) = @_;
    for (my $i = 0; $i < @subjects; $i += $PER_CALL) {
        my $last = $i + $PER_CALL - 1;
        $last = $#subjects if $last > $#subjects;
        decide(map { "$prefix$_" } @subjects[$i .. $last]);
    }
}

# mix7's keys: 7 buckets of 5, the newest the current one.
sub make_mix7 {
    my $script = $CASE =~ /hash/ ? <<'HASH' : <<'PACKED';
local b = math.floor(tonumber(redis.call('TIME')[1]) * 1000 / ARGV[1])
local at = string.format('%d', (b + ARGV[2]) * ARGV[1])
for _, k in ipairs(KEYS) do
  redis.call('HSET', k, 't', '35', 'o', string.format('%d', b - 6),
             'n', string.format('%d', b))
  for i = b - 6, b do
    redis.call('HSET', k, string.format('%d', i), '5')
  end
  redis.call('PEXPIREAT', k, at)
end
HASH
local b = math.floor(tonumber(redis.call('TIME')[1]) * 1000 / ARGV[1])
local s = struct.pack('<BI8', 1, b - 6)
for i = 0, 6 do
  s = s .. struct.pack('<I2I1', i, 5)
end
s = s .. struct.pack('<I8', 35)
for _, k in ipairs(KEYS) do
  redis.call('SET', k, s, 'PXAT',
             string.format('%d', (b + ARGV[2]) * ARGV[1]))
end
PACKED
    for (my $i = 0; $i < @subjects; $i += 256) {
        my @keys = grep { defined } @subjects[$i .. $i + 255];
        $redis->command('EVAL', $script, scalar @keys, @keys, $BUCKET_MS,
                        $SPAN);
    }
}

# Warm-up on other keys (the code paths, the allocator), then the measured
# keys as the scenario wants them.
each_once('warm:') for 1 .. 2;
if ($SCENARIO eq 'mix7') {
    make_mix7();
} elsif ($SCENARIO ne 'fresh') {
    each_once('');
}
if ($SCENARIO eq 'new') {
    my $second = int time;
    sleep 0.01 while int(time) == $second;
}

$redis->command('CONFIG', 'RESETSTAT');
$redis->zero;
each_once('');
my $total = $redis->instructions;
my $stats = $redis->command('INFO', 'commandstats');
my $memory = $redis->command('MEMORY', 'USAGE', $subjects[0]);
$redis->stop;

my %calls;
for (split /\r?\n/, $stats) {
    $calls{$1} = $2
        if /^cmdstat_([^:]+):calls=(\d+)/ && $1 ne 'config|resetstat';
}
printf "%s %s, %d a call: %.0f instructions a request; commands a request:"
    . " %s; MEMORY USAGE %s\n", $CASE, $SCENARIO, $PER_CALL,
    $total / $SUBJECTS,
    join(', ', map { sprintf '%s %.3f', $_, $calls{$_} / $SUBJECTS }
         sort keys %calls),
    $memory // 'no key';
