#!/usr/bin/perl
# Bad input: odd subjects (keys).
#
# Expected (spec): an empty key puts the request under no limit; 1-byte,
# binary (NUL from $binary_remote_addr, CR/LF and other bytes from the
# decoded $uri), UTF-8 and 8 KB keys work and are limited exactly; a subject
# over 256 bytes is stored under "rl:ZONE#<sha1 hex>", one up to 256 bytes
# as is; a key holding a Redis command ("\r\n*1\r\n$8\r\nFLUSHALL\r\n")
# cannot inject it: keys written before survive; no worker crashes.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Digest::SHA qw(sha1_hex);
use Time::HiRes qw(time sleep);
use FaultTest qw(raw_get rhdr sr statuses);

RateLimitTest::require_module();

my $WORKERS = 1;
my $t = FaultTest->new(workers => $WORKERS);

# ---------------------------------------------------------------------------
# helpers (local to this file)

sub hkey { $t->req('h', $_[0]) }
sub printable { my $s = shift; $s =~ s/([^\x21-\x7e])/sprintf '\\x%02x', ord $1/ge; length($s) > 80 ? substr($s, 0, 80) . '...' : $s }

# ---------------------------------------------------------------------------

$t->start_redis;
# New keys hashes: the packed layout writes a window with SET, and the count
# of SETs at the end is the check that no key injected one.
$t->write_conf(<<'EOC');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=2s layout=hash;
ratelimit_zone zh key=$http_x_api_key limit=2 window=60s;
ratelimit_zone za key=$arg_k limit=2 window=60s;
ratelimit_zone zu key=$uri limit=2 window=60s;
ratelimit_zone zb key=$binary_remote_addr limit=3 window=60s;
ratelimit_zone zc key=$http_x_api_key$arg_k limit=2 window=60s;
server {
    listen 127.0.0.1:%%PORT%%;
    large_client_header_buffers 4 16k;
    add_header X-RL-Status "$ratelimit_status" always;
    location /h/   { ratelimit zone=zh; alias %%TMP%%/html/; }
    location /a/   { ratelimit zone=za; alias %%TMP%%/html/; }
    location /u/   { ratelimit zone=zu; root %%TMP%%/html; try_files /index.html =404; }
    location /bin/ { ratelimit zone=zb; alias %%TMP%%/html/; }
    location /c/   { ratelimit zone=zc; alias %%TMP%%/html/; }
}
EOC
$t->start_nginx;

# keys written by someone else before: must survive everything below
$t->redis('SET', 'sentinel:string', 'keep me');
$t->redis('HSET', 'sentinel:hash', 'f', 'v');
$t->redis('SET', "rl:zh:other", 'not ours');

{
    my ($up) = $t->wait_passed('h', 'warm', 3);
    ok(defined $up, 'nginx + redis up');
}

# --- empty key: no limit ---------------------------------------------------------
{
    my @r = map { hkey('') } 1 .. 4;
    is(statuses(@r), '200 200 200 200', 'empty header value: never limited');
    ok(!(grep { defined rhdr($_, 'X-RateLimit-Limit') || defined rhdr($_, 'RateLimit') } @r), 'empty header value: no rate limit headers');
    my @n = map { raw_get($t->port, '/h/index.html', {}, 5) } 1 .. 4;
    is(statuses(@n), '200 200 200 200', 'no header: never limited');
    my @s = map { hkey('   ') } 1 .. 3;
    is(statuses(@s), '200 200 200', 'blank (spaces only) header value: never limited');
    my @a = map { raw_get($t->port, '/a/index.html?k=', {}, 5) } 1 .. 3;
    is(statuses(@a), '200 200 200', 'empty $arg_k: never limited');
    is($t->redis('EXISTS', 'rl:zh:'), 0, 'no key for the empty subject');
    is($t->redis('EXISTS', 'rl:za:'), 0, 'no key for the empty $arg_k');
}

# --- 1 byte ---------------------------------------------------------------------
{
    my @r = map { hkey('x') } 1 .. 3;
    is(statuses(@r), '200 200 429', '1-byte key: exact limit');
    is($t->redis_window_total('rl:zh:x'), 2, '1-byte key: stored as rl:zh:x');
}

# --- lengths around the 256-byte hashing threshold, and 8 KB -------------------------
for my $len (255, 256, 257, 1000, 8192) {
    my $subj = join '', map { chr(ord('a') + ($_ * 7 + $len) % 26) } 1 .. $len;
    my @r = map { hkey($subj) } 1 .. 3;
    is(statuses(@r), '200 200 429', "$len-byte key: exact limit");
    is(rhdr($r[0], 'X-RateLimit-Remaining'), '1', "$len-byte key: remaining 1 after the first");
    my $key = $len > 256 ? 'rl:zh#' . sha1_hex($subj) : "rl:zh:$subj";
    is($t->redis_window_total($key), 2, $len > 256 ? "$len-byte key: stored as rl:zh#<sha1 hex of the subject>"
                                                 : "$len-byte key: stored as is");
    if ($len > 256) {
        my @k = grep { length($_) > length('rl:zh:') + 256 } $t->redis_keys('rl:zh*');
        is(scalar @k, 0, "$len-byte key: no key longer than rl:zh: + 256 bytes");
    }
}
{
    # two 8 KB subjects differing in the last byte only: separate counters
    my $base = 'Q' x 8191;
    my @r1 = map { hkey($base . '1') } 1 .. 2;
    my @r2 = map { hkey($base . '2') } 1 .. 3;
    is(statuses(@r1, @r2), '200 200 200 200 429', '8 KB keys differing in the last byte: counted apart');
    is($t->redis_window_total('rl:zh#' . sha1_hex($base . '1')), 2, '8 KB key 1: its own hash key');
    is($t->redis_window_total('rl:zh#' . sha1_hex($base . '2')), 2, '8 KB key 2: its own hash key');
    my @keys = grep { /^rl:zh#/ } $t->redis_keys('rl:zh*');
    ok(!(grep { !/^rl:zh#[0-9a-f]{40}$/ } @keys), 'every hashed key is rl:zh#<40 hex>') or diag(join "\n", map { printable($_) } @keys);
}

# --- UTF-8 and other high / control bytes in a header ----------------------------
{
    my $utf8 = "\x{43a}\x{43b}\x{44e}\x{447}-\x{1F600}";
    utf8::encode($utf8);
    my @r = map { hkey($utf8) } 1 .. 3;
    is(statuses(@r), '200 200 429', 'UTF-8 key: exact limit');
    is($t->redis_window_total("rl:zh:$utf8"), 2, 'UTF-8 key: stored byte for byte');

    my $bytes = "a\x01\x7f\xfe\xff\tb";
    my @b = map { hkey($bytes) } 1 .. 3;
    is(statuses(@b), '200 200 429', 'control and 0xff bytes in a header key: exact limit');
    is($t->redis_window_total("rl:zh:$bytes"), 2, 'control bytes: stored byte for byte');
}

# --- $binary_remote_addr: a key with a NUL byte ----------------------------------
{
    my @r = map { raw_get($t->port, '/bin/index.html', {}, 5) } 1 .. 4;
    is(statuses(@r), '200 200 200 429', '$binary_remote_addr (4 bytes with NULs): exact limit');
    is($t->redis_window_total("rl:zb:\x7f\x00\x00\x01"), 3, 'binary key stored byte for byte (rl:zb:\x7f\x00\x00\x01)');
    my @k = $t->redis_keys('rl:zb:*');
    is(scalar @k, 1, 'exactly one key in zone zb') or diag(join ', ', map { printable($_) } @k);
}

# --- $arg_k: raw (not percent-decoded) argument text -------------------------------
{
    my @r = map { raw_get($t->port, '/a/index.html?k=a%00b', {}, 5) } 1 .. 3;
    is(statuses(@r), '200 200 429', '$arg_k "a%00b": exact limit');
    is($t->redis_window_total('rl:za:a%00b'), 2, '$arg_k: the raw text is the key');

    my $inj = '%0D%0A*1%0D%0A$8%0D%0AFLUSHALL%0D%0A';
    my @i = map { raw_get($t->port, "/a/index.html?k=$inj", {}, 5) } 1 .. 3;
    is(statuses(@i), '200 200 429', '$arg_k with an encoded FLUSHALL: exact limit');
    is($t->redis_window_total("rl:za:$inj"), 2, '$arg_k with an encoded FLUSHALL: stored as the raw text');
}

# --- $uri: decoded, so real CR LF and NUL bytes -------------------------------------
{
    my $inj = "/u/\r\n*1\r\n\$8\r\nFLUSHALL\r\n";
    (my $enc = $inj) =~ s/([^A-Za-z0-9\/])/sprintf '%%%02X', ord $1/ge;
    my @r = map { raw_get($t->port, $enc, {}, 5) } 1 .. 3;
    is(statuses(@r), '200 200 429', '$uri with CR LF and a FLUSHALL command: exact limit');
    is($t->redis_window_total("rl:zu:$inj"), 2, '$uri key with CR LF stored byte for byte');

    my $inj2 = "/u/x\r\n*3\r\n\$3\r\nSET\r\n\$15\r\nsentinel:string\r\n\$6\r\nhacked\r\n";
    (my $enc2 = $inj2) =~ s/([^A-Za-z0-9\/])/sprintf '%%%02X', ord $1/ge;
    my @s = map { raw_get($t->port, $enc2, {}, 5) } 1 .. 3;
    is(statuses(@s), '200 200 429', '$uri with an embedded SET command: exact limit');

    my $nul = raw_get($t->port, '/u/a%00b', {}, 5);
    like(sr($nul), qr{^(?:200/PASSED|400/-)$}, '$uri with %00: PASSED or refused by nginx (' . sr($nul) . ')');

    my @sp = map { raw_get($t->port, '/u/%22quoted%22%20%5C%20%23hash', {}, 5) } 1 .. 3;
    is(statuses(@sp), '200 200 429', '$uri with quotes, backslash, space, #: exact limit');
    is($t->redis_window_total("rl:zu:/u/\"quoted\" \\ #hash"), 2, 'quotes etc. stored byte for byte');

    # a subject of "#..." cannot collide with a hashed key
    my $long = 'z' x 300;
    my $h = sha1_hex("/u/$long");
    my @l = map { raw_get($t->port, "/u/$long", {}, 5) } 1 .. 2;
    is(statuses(@l), '200 200', 'long $uri subject: passes twice');
    is($t->redis_window_total("rl:zu#$h"), 2, 'long $uri subject: hashed key');
}

# --- two variables glued together --------------------------------------------------
{
    my @r = map { raw_get($t->port, '/c/index.html?k=%0A', { 'X-Api-Key' => "\x{ff}" }, 5) } 1 .. 3;
    is(statuses(@r), '200 200 429', 'key from two variables with odd bytes: exact limit');
    is($t->redis_window_total("rl:zc:\xff%0A"), 2, 'combined key stored byte for byte');
}

# --- nothing was injected -----------------------------------------------------------
{
    is($t->redis('GET', 'sentinel:string'), 'keep me', 'sentinel string survived (no FLUSHALL, no SET injected)');
    is_deeply($t->redis('HGETALL', 'sentinel:hash'), ['f', 'v'], 'sentinel hash survived');
    is($t->redis('GET', 'rl:zh:other'), 'not ours', 'unrelated rl: key survived');
    my $stats = $t->redis('INFO', 'commandstats');
    unlike($stats, qr/^cmdstat_(?:flushall|flushdb):/m, 'redis never ran FLUSHALL or FLUSHDB')
        or diag(join "\n", grep { /flush/ } split /\n/, $stats);
    my ($sets) = $stats =~ /^cmdstat_set:calls=(\d+)/m;
    is($sets // 0, 2, 'the only SETs redis ran are the test\'s own two');
}

# --- the log stays one line per message -----------------------------------------------
{
    my $log = $t->error_log;
    ok(index($log, "\0") < 0, 'error.log holds no NUL byte');
    my @inj = grep { /^(?:\*\d|\$\d|FLUSHALL|SET|sentinel)/ } split /\n/, $log;
    is(scalar @inj, 0, 'error.log: no line starts with injected text') or diag(join "\n", map { printable($_) } @inj);
    my @cr = grep { /\r/ } split /\n/, $log;
    is(scalar @cr, 0, 'error.log: no raw CR in a line') or diag(join "\n", map { printable($_) } @cr[0 .. ($#cr < 4 ? $#cr : 4)]);
    my @big = grep { length($_) > 2000 && /limiting requests/ } split /\n/, $log;
    is(scalar @big, 0, 'error.log: "limiting requests" lines stay short for an 8 KB key');
}

my @pids = $t->served_pids;
is(scalar @pids, 1, 'one worker served everything (no crash/respawn)');

$t->stop_nginx;
$t->stop_redis;
$t->final_checks;

done_testing;
