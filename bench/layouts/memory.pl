#!/usr/bin/perl
# Redis's bytes per subject (MEMORY USAGE) of a sliding window's key with
# 1, 10 and 60 live buckets of 5: today's hash, and the packed string of
# packed.lua with counts of 1 and 4 bytes, made whole by one SET (the
# script's new bucket) and grown bucket by bucket in place (SETRANGE past
# its end, as the command's StringTruncate: the allocator's slack stays).
# The key, rl:z60: and 13 bytes, gives the hash the figures of
# docs/performance.md, "Per subject".
#
#   perl -I t/lib bench/layouts/memory.pl

use strict;
use warnings;

use RateLimitTest;

my $t = RateLimitTest->new;
$t->start_redis(redis_module => 0);
my $KEY = 'rl:z60:abcdefghijklm';
my $BASE = 29_000_000;

sub usage { $t->redis('MEMORY', 'USAGE', $KEY, 'SAMPLES', 0) }

sub hash_of {
    my ($n) = @_;
    $t->redis('DEL', $KEY);
    $t->redis('HSET', $KEY, 't', 5 * $n, 'o', $BASE, 'n', $BASE + $n - 1,
              map { ($BASE + $_, 5) } 0 .. $n - 1);
    $t->redis('PEXPIRE', $KEY, 60000);
    return usage();
}

my $PACK = <<'LUA';
local n, w, grow = tonumber(ARGV[1]), ARGV[2], ARGV[3] == '1'
local function entry(i)
  return struct.pack('<I2I' .. w, i, 5)
end
local s = struct.pack('<BI8', tonumber(w), 29000000) .. entry(0)
if not grow then
  for i = 1, n - 1 do
    s = s .. entry(i)
  end
  redis.call('SET', KEYS[1], s .. struct.pack('<I8', 5 * n), 'PX', 60000)
  return
end
redis.call('SET', KEYS[1], s .. struct.pack('<I8', 5), 'PX', 60000)
for i = 1, n - 1 do
  redis.call('SETRANGE', KEYS[1], #s,
             entry(i) .. struct.pack('<I8', 5 * (i + 1)))
  s = s .. entry(i)
end
LUA

sub packed_of {
    my ($n, $width, $grow) = @_;
    $t->redis('EVAL', $PACK, 1, $KEY, $n, $width, $grow);
    return usage();
}

print "| live buckets | hash | packed, 1-byte counts, SET | grown in place"
    . " | packed, 4-byte counts, SET | grown in place |\n";
print "|---:|---:|---:|---:|---:|---:|\n";
for my $n (1, 10, 60) {
    printf "| %d | %d | %d | %d | %d | %d |\n", $n, hash_of($n),
        packed_of($n, 1, 0), packed_of($n, 1, 1), packed_of($n, 4, 0),
        packed_of($n, 4, 1);
}
