#!/usr/bin/perl
# A request waiting for its GCRA turn holds no slot of its concurrency zone
# (issue 27): a location with a GCRA zone that may make requests wait (a
# burst without nodelay) asks its concurrency zone after the wait.  A slot
# refused then gives the GCRA turn (and any rate zone's count) back.
#
# Zones: g, 1r/s GCRA, burst=5 (a second request waits about 1 s); c, one
# slot per subject and no queue (a request finding the slot taken is
# refused at once).  /both/ applies both, /slow/ only c (the backend holds
# the request, and with it the slot, for `hold` ms), /g/ only g.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use FaultTest qw(rhdr);
use HoldBackend;

RateLimitTest::require_module();

my $t = FaultTest->new(workers => 2);
$t->start_redis;
my $backend = $t->port('BACKEND');
HoldBackend::start($t, $backend);

$t->write_conf(<<'EOC');
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=300ms;
ratelimit_zone g key=$arg_key rate=1r/s algorithm=gcra;
ratelimit_zone c key=$arg_key concurrency=1 queue=0 lease=5s;
ratelimit_zone w key=$arg_key rate=100r/m;
log_format slots '$arg_key $arg_seq $status rs=$ratelimit_status rd=$ratelimit_delay';
server {
    listen 127.0.0.1:%%PORT%%;
    access_log %%TMP%%/slots.log slots;
    add_header X-RL-Status "$ratelimit_status" always;
    add_header X-RL-Delay "$ratelimit_delay" always;
    location /both/ {
        ratelimit zone=g burst=5;
        ratelimit zone=w;
        ratelimit zone=c;
        proxy_pass http://127.0.0.1:%%BACKEND%%;
    }
    location /nodelay/ {
        ratelimit zone=g burst=5 nodelay;
        ratelimit zone=c;
        proxy_pass http://127.0.0.1:%%BACKEND%%;
    }
    location /slow/ { ratelimit zone=c; proxy_pass http://127.0.0.1:%%BACKEND%%; }
    location /g/    { ratelimit zone=g burst=5; proxy_pass http://127.0.0.1:%%BACKEND%%; }
    location /w/    { ratelimit zone=w; proxy_pass http://127.0.0.1:%%BACKEND%%; }
}
EOC
$t->start_nginx;

sub path { my ($loc, $key, $seq, $hold) = @_; "/$loc/x?key=$key&seq=$seq&hold=" . ($hold // 0) }

my $up;
for my $i (1 .. 100) {
    my $r = FaultTest::raw_get($t->port('PORT'), path('g', "warm$i", 0), {}, 3);
    last if $up = (rhdr($r, 'X-RL-Status') // '') eq 'PASSED';
    sleep 0.03;
}
ok($up, 'Redis up');

# 1. B waits for its turn (about 1 s) while C, on /slow/, takes the one
# slot: B held none.  Then B's turn comes, C has left, B takes the slot.
{
    my @r = $t->burst(3, sub {
        my $i = shift;
        return (path('both', 'k1', 'A'), {}) if $i == 0;
        return (path('both', 'k1', 'B'), {}) if $i == 1;
        return (path('slow', 'k1', 'C', 300), {});
    }, 5, 0.15);
    my ($A, $B, $C) = @r;
    is($A->{status}, 200, 'A: admitted at once');
    is($C->{status}, 200, 'C: took the slot while B waited for its turn (B held none)');
    is($B->{status}, 200, 'B: its turn came and the slot was free again');
    my $delay = rhdr($B, 'X-RL-Delay') // -1;
    cmp_ok($delay, '>=', 700, "B waited for its turn ($delay ms)");
    cmp_ok($B->{elapsed}, '<', 1.6, sprintf('B answered after its turn (%.2f s)', $B->{elapsed}));
}

# 2. B waits for its turn while D holds the slot past it: B is refused by
# the concurrency zone when its turn comes (A + 1 s), and gives its GCRA
# turn and its count in w back: E on /g/ at A + 1.2 s passes at once (B's
# turn kept would make it wait until A + 2 s), and w counts A alone.
{
    my @r = $t->burst(4, sub {
        my $i = shift;
        return (path('both', 'k2', 'A'), {}) if $i == 0;
        return (path('slow', 'k2', 'D', 2500), {}) if $i == 1;
        return (path('both', 'k2', 'B'), {}) if $i == 2;
        return (path('g', 'k2', 'E'), {});
    }, 5, 0.4);
    my ($A, $D, $B, $E) = @r;
    is($A->{status}, 200, 'A: admitted at once');
    is($B->{status}, 429, 'B: its turn came, the slot was held: refused');
    cmp_ok($B->{elapsed}, '>=', 0.1, sprintf('B refused after its wait (%.2f s)', $B->{elapsed}));
    is($D->{status}, 200, 'D: held the slot');
    is($E->{status}, 200, 'E on /g/: admitted');
    is(rhdr($E, 'X-RL-Delay'), '0', 'E: no wait: the refused B gave its GCRA turn back');

    my $W = FaultTest::raw_get($t->port('PORT'), path('w', 'k2', 'W'), {}, 5);
    is(rhdr($W, 'X-RateLimit-Remaining'), 98, 'w counts A and W only: B gave its count back');
}

# 3. nodelay: nothing waits, so the slot is asked first, as for any
# location: a request refused by the slot is counted in no rate zone.
{
    my @r = $t->burst(2, sub {
        my $i = shift;
        return (path('slow', 'k3', 'D', 800), {}) if $i == 0;
        return (path('nodelay', 'k3', 'N'), {});
    }, 5, 0.15);
    is($r[1]{status}, 429, 'nodelay: the slot taken: refused at once');
    my $F = FaultTest::raw_get($t->port('PORT'), path('g', 'k3', 'F'), {}, 5);
    is(rhdr($F, 'X-RL-Delay'), '0', 'nodelay: the refused request took no GCRA turn');
}

$t->stop_and_check('gcra slot');
done_testing;
