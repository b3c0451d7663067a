#!/usr/bin/perl
# A rolling upgrade: two nginx servers share one Redis, one running the
# release before this tree's (RATELIMIT_OLD_MODULE, and its Redis module
# RATELIMIT_OLD_REDIS_MODULE), the other this tree's module, as a fleet
# does halfway through replacing its servers.  The Redis is each one such
# a fleet can meet: without the Redis module, with the old release's, with
# this tree's.
#
# Expected (spec: docs/operations.md "Upgrading", docs/redis-module.md):
# - requests sent to the two servers in turn, each subject's alternating
#   between them, are each counted once, in a sliding and a fixed window:
#   every answer is a 200 (none fails, none is limited below the limit),
#   and each subject's count in Redis, read with this tree's window script
#   (a peek, which reads whatever layout the key is in), is the number of
#   requests sent for it;
# - a limit of 5 shared by the two servers admits exactly 5 requests of a
#   subject in all, whichever server each reached;
#   This tree's server has layout=hash (new keys hashes, which the old
#   release reads): with the old release's Redis module its probe is
#   refused whole, and its calls go to the script;
# - the old release's Redis module replaced by this tree's in the running
#   Redis (MODULE UNLOAD, then MODULE LOAD), under both servers' live
#   connections, with requests between the two and after: each counted
#   once, none failed (a call the unloaded command refused ran nothing and
#   is sent again as the script); and the other way, this tree's replaced
#   by the old release's: this tree's server's calls, refused whole by it,
#   sent again as the script; there this tree's server has `ratelimit_query
#   ... override=on` (its calls name marker keys, a count the old release's
#   module refuses too), and a subject's override set through its status
#   API (limit 7, zone small's 5) holds through the change: decided by the
#   command before (X-RateLimit-Limit 7), by the script after, 7 admitted
#   in all;
# - then the switch: the old server replaced by one of this tree's, both
#   with layout=packed, in the same Redis: each subject's count goes on
#   from its hash, which its first request there made a packed string, a
#   new subject's key is a packed string, the limit of 5 already reached
#   stays reached;
# - and back: this tree's server with layout=hash again, one request of
#   each new subject there (which makes its packed string a hash), then the
#   old server back beside it: each request counted once, none failed.
# Skipped without RATELIMIT_OLD_MODULE; the phases with the old Redis
# module without RATELIMIT_OLD_REDIS_MODULE.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use RateLimitTest qw(hdr);
use HTTP::Tiny;

my $OLD = $ENV{RATELIMIT_OLD_MODULE};
plan skip_all => 'RATELIMIT_OLD_MODULE (the release before, built) not set'
    unless $OLD && -f $OLD;
RateLimitTest::require_module();
my $OLD_REDIS = $ENV{RATELIMIT_OLD_REDIS_MODULE};
my $NEW_REDIS = RateLimitTest::redis_module_so();

my $WORKERS = 2;
my $new = RateLimitTest->new(workers => $WORKERS);
my $old = RateLimitTest->new(workers => $WORKERS);
$old->{ports}{REDIS_PORT} = $new->redis_port;

# An hour's windows: a run of a few seconds stays in one fixed window
# (phase() does not start in an hour's last minute).  A request Redis did
# not decide gets a 503 (fail closed), so that none passes unseen.
my $CONF = <<'EOF';
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=2s;
ratelimit_fail closed;
ratelimit_zone slide key=$http_x_api_key limit=1000000 window=1h bucket=1m;
ratelimit_zone fixed key=$http_x_api_key limit=1000000 window=1h algorithm=fixed;
ratelimit_zone small key=$http_x_api_key limit=5 window=1h bucket=1m;

server {
    listen 127.0.0.1:%%PORT%%;
    location /slide/ { ratelimit zone=slide; alias %%TMP%%/html/; }
    location /fixed/ { ratelimit zone=fixed; alias %%TMP%%/html/; }
    location /small/ { ratelimit zone=small; alias %%TMP%%/html/; }
}
EOF

# Each zone as the script is called with it (window_script.hpp): limit,
# bucket in ms, buckets a window, kind, enforced.
my %ZONE = (
    slide => [1000000, 60000, 60, 's', '1'],
    fixed => [1000000, 3600000, 1, 'f', '1'],
);
my $SUBJECTS = 8;
my $ROUNDS = 6;

# This tree's server: new keys hashes while the old release shares Redis
# (the old one does not know the parameter).
(my $HASH_CONF = $CONF) =~ s/timeout=2s;/timeout=2s layout=hash;/ or die;
(my $PACKED_CONF = $CONF) =~ s/timeout=2s;/timeout=2s layout=packed;/ or die;
# ... with overrides (issue 41): every rate zone reads its side keys.
(my $OVERRIDE_CONF = $HASH_CONF) =~ s|(location /small/[^\n]*\n)|$1    location = /q { ratelimit_query zone=small override=on; }\n| or die;

my $SHA;

# The count of each subject's key of `zone` in Redis, by a peek ("p" and
# the zone's byte 0) of this tree's script; "error" where it could not read
# the key.  Subjects u1 to u8, or `prefix`1 to 8.
sub counts_in_redis {
    my ($zone, $prefix) = @_;
    my @keys = map { "rl:$zone:" . ($prefix // 'u') . $_ } 1 .. $SUBJECTS;
    my $r = $new->redis('EVALSHA', $SHA, scalar @keys, @keys, 1,
                        @{ $ZONE{$zone} }, ("p\0") x @keys);
    die "peek: $$r\n" if RateLimitTest::is_redis_error($r);
    return join ' ', map {
        RateLimitTest::is_redis_error($r->[1 + 4 * $_]) ? 'error'
                                                        : $r->[2 + 4 * $_]
    } 0 .. $#keys;
}

sub status_line { join ' ', map { $_->{status} } @_ }

# Starts Redis (with `module_args`) and both servers, each worker of
# each connected and told whether it uses the command or the script.
# This tree's server's configuration: \$text first, or $HASH_CONF.
sub start_fleet {
    my ($name, @module_args) = @_;
    my $new_conf = ref $module_args[0] eq 'SCALAR' ? ${ shift @module_args } : $HASH_CONF;
    RateLimitTest::sleep_until_phase(60, 0) if time % 3600 >= 3540;
    $new->start_redis(redis_module => 0, args => \@module_args);
    $SHA = $new->redis('SCRIPT', 'LOAD', RateLimitTest::window_script());
    $new->write_conf($new_conf);
    $old->write_conf($CONF, module => $OLD);
    start_servers($name);
}

# Both servers started, each worker of each connected and told whether it
# uses the command or the script.
sub start_servers {
    my ($name) = @_;
    $new->start_nginx;
    $old->start_nginx;
    my $asked = qr/this connection uses/;
    ok(RateLimitTest::wait_until(sub {
           $new->count_log($asked) >= $WORKERS
               && $old->count_log($asked) >= $WORKERS }, 5),
       "$name: every worker connected and chose the command or the script");
}

sub stop_fleet {
    $old->stop_nginx;
    $new->stop_nginx;
    $new->stop_redis;
}

# `rounds` requests a subject in `zone`, each subject's alternating between
# the servers: every answer a 200.  Subjects u1 to u8, or `prefix`1 to 8.
sub send_rounds {
    my ($name, $zone, $rounds, $prefix) = @_;
    my @statuses;
    for my $round (1 .. $rounds) {
        for my $u (1 .. $SUBJECTS) {
            my $server = ($round + $u) % 2 ? $old : $new;
            push @statuses, $server->get("/$zone/index.html",
                                         { 'X-Api-Key' => ($prefix // 'u') . $u });
        }
    }
    is(status_line(@statuses), join(' ', ('200') x ($rounds * $SUBJECTS)),
       "$name, $zone: no request failed nor was limited");
}

# A fleet of the two releases on a Redis started with `module_args`;
# `check`, if given, run before it stops.
sub phase {
    my ($name, @module_args) = @_;
    my $check = ref $module_args[0] eq 'CODE' ? shift @module_args : undef;
    start_fleet($name, @module_args);

    for my $zone (qw(slide fixed)) {
        send_rounds($name, $zone, $ROUNDS);
        is(counts_in_redis($zone), join(' ', ($ROUNDS) x $SUBJECTS),
           "$name, $zone: each subject counted once a request, in Redis");
    }

    send_small($name, '200 200 200 200 200 429 429 429',
               'a limit of 5 shared by both servers admits 5 in all');
    diag_calls($name);
    $check->() if $check;
    stop_fleet();
}

# Requests of one subject in zone small, to the two servers in turn.
sub send_small {
    my ($name, $want, $what) = @_;
    my @small = map {
        ($_ % 2 ? $old : $new)->get('/small/index.html',
                                    { 'X-Api-Key' => 'lim' })
    } 1 .. split / /, $want;
    is(status_line(@small), $want, "$name: $what");
}

sub diag_calls {
    my ($name) = @_;
    my $stats = $new->redis('INFO', 'commandstats');
    diag("$name: Redis ran " . join(', ', $stats
         =~ /^cmdstat_(ratelimit\.decide|evalsha|eval):calls=(\d+)/mg));
}

# With the old release's Redis module, this tree's probe is refused whole
# (its number of zones carries a layout letter): the script.
sub old_module_refuses {
    my $refused = qr/cannot run ratelimit\.decide \(ERR ratelimit: the number of zones is missing or too large\): this connection uses the window script/;
    phase("the old release's Redis module", sub {
        is($new->count_log($refused), $WORKERS,
           "the old release's Redis module: it refused this tree's probe"
           . ' whole, each worker uses the script');
    }, '--loadmodule', $OLD_REDIS);
}

# The old release's Redis module replaced by this tree's in the running
# Redis, under both servers' live connections.
sub module_replaced {
    my $name = 'the Redis module replaced in place';
    start_fleet($name, '--loadmodule', $OLD_REDIS,
                '--enable-module-command', 'yes');
    send_rounds("$name, before", 'slide', 2);
    is($new->redis('MODULE', 'UNLOAD', 'ratelimit'), 'OK',
       "$name: the old release's unloaded");
    send_rounds("$name, unloaded", 'slide', 2);
    my $lost = qr/no longer knows ratelimit\.decide/;
    ok($old->count_log($lost) >= 1,
       "$name: a call of the old server refused as unknown, and said so");
    is($new->count_log($lost), 0,
       "$name: this tree's server was on the script, the old module having"
       . ' refused its probe');
    like($new->redis('INFO', 'commandstats'), qr/^cmdstat_eval:calls=[1-9]/m,
         "$name: the refused calls sent again as the script (EVAL)");
    is($new->redis('MODULE', 'LOAD', $NEW_REDIS), 'OK',
       "$name: this tree's loaded");
    send_rounds("$name, after", 'slide', 2);
    is(counts_in_redis('slide'), join(' ', (6) x $SUBJECTS),
       "$name: each subject counted once a request, in Redis");
    stop_fleet();
}

# This tree's Redis module replaced by the old release's, under both
# servers' live connections: this tree's server's calls, refused whole,
# go to the script.  This tree's server reads overrides; subject "ov" has
# one (limit 7 in zone small), set through its status API.
sub module_downgraded {
    my $name = "this tree's Redis module replaced by the old release's";
    start_fleet($name, \$OVERRIDE_CONF, '--loadmodule', $NEW_REDIS,
                '--enable-module-command', 'yes');
    send_rounds("$name, before", 'slide', 2);
    my $put = HTTP::Tiny->new(timeout => 5)->request(
        'PUT', $new->url('/q?zone=small&key=ov&limit=7'));
    is($put->{status}, 204, "$name: an override of \"ov\" set, limit 7");
    my $decided = $new->redis('INFO', 'commandstats')
                  =~ /^cmdstat_ratelimit\.decide:calls=(\d+)/m ? $1 : 0;
    my @ov = map { $new->get('/small/index.html', { 'X-Api-Key' => 'ov' }) }
             1 .. 2;
    is(status_line(@ov) . ' ' . (hdr($ov[0], 'X-RateLimit-Limit') // '-'),
       '200 200 7', "$name: the override applies (X-RateLimit-Limit 7)");
    my $decided_after = $new->redis('INFO', 'commandstats')
                        =~ /^cmdstat_ratelimit\.decide:calls=(\d+)/m ? $1 : 0;
    cmp_ok($decided_after, '>=', $decided + 2,
           "$name: decided by this tree's Redis module's command");
    # (the PUT was an EVAL)
    my $eval = sub { ($new->redis('INFO', 'commandstats')
                      =~ /^cmdstat_eval:calls=(\d+)/m)[0] // 0 };
    my $eval_before = $eval->();
    is($new->redis('MODULE', 'UNLOAD', 'ratelimit'), 'OK',
       "$name: this tree's unloaded");
    is($new->redis('MODULE', 'LOAD', $OLD_REDIS), 'OK',
       "$name: the old release's loaded");
    # the first calls of this tree's server after the change: refused,
    # sent again as the script
    @ov = map { $new->get('/small/index.html', { 'X-Api-Key' => 'ov' }) }
          1 .. 7;
    is(status_line(@ov) . ' ' . (hdr($ov[0], 'X-RateLimit-Limit') // '-'),
       '200 200 200 200 200 429 429 7',
       "$name: the override holds: 7 admitted in all");
    send_rounds("$name, after", 'slide', 4);
    is($new->count_log(qr/no longer knows ratelimit\.decide/), $WORKERS,
       "$name: this tree's server's calls refused, each worker said so");
    ok($eval->() > $eval_before, "$name: the refused calls sent again as the script"
       . ' (EVAL)');
    is(counts_in_redis('slide'), join(' ', (6) x $SUBJECTS),
       "$name: each subject counted once a request, in Redis");
    stop_fleet();
}

# The old server gone: both servers this tree's with layout=packed, in the
# Redis the mixed fleet counted in (with `module_args`).
sub switched {
    my ($name, @module_args) = @_;
    start_fleet($name, @module_args);
    send_rounds("$name, mixed", 'slide', 2);
    send_rounds("$name, mixed", 'fixed', 2);
    send_small("$name, mixed", '200 200 200 200', 'counted');
    $old->stop_nginx;
    $new->stop_nginx;
    $new->write_conf($PACKED_CONF);
    $old->write_conf($PACKED_CONF);
    start_servers("$name, switched");

    for my $zone (qw(slide fixed)) {
        send_rounds("$name, switched", $zone, 4);
        is(counts_in_redis($zone), join(' ', (6) x $SUBJECTS),
           "$name, $zone: each subject's count went on from its hash");
        is(types($zone), join(' ', ('string') x $SUBJECTS),
           "$name, $zone: each subject's hash made a packed string by its"
           . ' first request');
        send_rounds("$name, switched", $zone, 3, 'v');
        is(counts_in_redis($zone, 'v'), join(' ', (3) x $SUBJECTS),
           "$name, $zone: new subjects counted");
        is(types($zone, 'v'), join(' ', ('string') x $SUBJECTS),
           "$name, $zone: new subjects' keys packed strings");
    }

    send_small("$name, switched", '200 429 429',
               'the limit of 5 goes on from the 4 counted before');
    gone_back($name);
    diag_calls($name);
    stop_fleet();
}

# The types of the subjects' keys of `zone` (u1 to u8, or `prefix`1 to 8).
sub types {
    my ($zone, $prefix) = @_;
    return join ' ', map {
        $new->redis('TYPE', "rl:$zone:" . ($prefix // 'u') . $_)
    } 1 .. $SUBJECTS;
}

# Back to the release before (docs/operations.md, "Upgrading"), from the
# switch: this tree's server with layout=hash, the old server beside it;
# one request of each new subject (v1 to v8, whose keys the switch made
# packed strings) reaches this tree's server first.
sub gone_back {
    my ($name) = @_;
    $name = "$name, gone back";
    $old->stop_nginx;
    $new->stop_nginx;
    $new->write_conf($HASH_CONF);
    $old->write_conf($CONF, module => $OLD);
    start_servers($name);

    for my $zone (qw(slide fixed)) {
        my @first = map {
            $new->get("/$zone/index.html", { 'X-Api-Key' => "v$_" })
        } 1 .. $SUBJECTS;
        is(status_line(@first), join(' ', ('200') x $SUBJECTS),
           "$name, $zone: a request of each subject to this tree's server");
        is(types($zone, 'v'), join(' ', ('hash') x $SUBJECTS),
           "$name, $zone: each subject's string made a hash by it");
        send_rounds($name, $zone, 2, 'v');
        is(counts_in_redis($zone, 'v'), join(' ', (6) x $SUBJECTS),
           "$name, $zone: each subject's count went on from its string");
    }
}

phase('no Redis module');
SKIP: {
    skip 'RATELIMIT_OLD_REDIS_MODULE (the release before, built) not set', 7
        unless $OLD_REDIS && -f $OLD_REDIS;
    old_module_refuses();
}
SKIP: {
    skip "this tree's Redis module not built", 6 unless $NEW_REDIS;
    phase("this tree's Redis module", '--loadmodule', $NEW_REDIS);
}
SKIP: {
    skip 'both releases\' Redis modules needed', 27
        unless $NEW_REDIS && $OLD_REDIS && -f $OLD_REDIS;
    module_replaced();
    module_downgraded();
}
switched('the switch to packed strings, no Redis module');
SKIP: {
    skip "this tree's Redis module not built", 27 unless $NEW_REDIS;
    switched("the switch to packed strings, this tree's Redis module",
             '--loadmodule', $NEW_REDIS);
}

done_testing;
