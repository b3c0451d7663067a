#!/usr/bin/perl
# GCRA zones against nginx's own limit_req (issue 27): one nginx, one worker
# (so limit_req's per-worker state is all of its state), the same seeded
# random trace sent to a limit_req location and to the module's location
# with the same rate and burst, for each of: no option, nodelay, delay=2.
#
# Expected (spec-27, "same meaning as nginx's limit_req"): for at least 99%
# of the requests the outcome is the same (at once, delayed, rejected) and,
# where both delayed, the delays agree within 5 ms (limit_req's
# $request_time, the module's $ratelimit_delay); the module waits what
# $ratelimit_delay says: its $request_time is never less, and more by the
# Redis round trip only (5 ms for 99%, 50 ms for all on a busy machine).
#
# Where they differ on a boundary, limit_req is the lenient one: it counts
# whole milliseconds of its cached clock (floor(now) - floor(then)), so it
# admits a request up to 1 ms before its turn, 0.5 ms on average; the
# module counts microseconds of Redis time.  A difference at the reject
# boundary of a saturated run then shifts the later delays of that subject
# by one interval until its backlog is gone (tagged "follows").  Every difference is printed with
# its timings: the planned offset, when each copy was sent and reached
# nginx, and how far the planned time lies from a decision boundary of
# limit_req's arithmetic (t/lib/GcraTest.pm), so it can be explained.
#
# The trace: per option 5 subjects, each a random mix of bursts (3-10
# requests 4-25 ms apart), steady runs (4-12 requests 0.7-1.4 emission
# intervals apart) and pauses (0.3-2 s), over 12 s; GCRA_SEED=N repeats a
# run.  Its planned times keep 2 ms (GCRA_MARGIN_MS) from limit_req's boundaries (rejected /
# delayed) as computed on the planned times, so that the client's and the
# server's scheduling (a millisecond or two) does not decide outcomes; a
# request that still lands on a boundary is one of the differences printed.
# The two copies of a request are written at the same moment, one after the
# other, on connections opened beforehand; the copies of the three options
# go at once too (about 200 requests a second in all).

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use RateLimitTest;
use RateLimitTest::Env qw(_read_file);
use GcraTest qw(play model_new model_decide);

RateLimitTest::require_module();

my $RATE     = 10;       # r/s: emission interval T = 100 ms
my $T        = 1 / $RATE;
my $BURST    = 5;
my $DELAY_M  = 2;
my $SUBJECTS = 5;
my $SPAN     = 12;       # seconds of trace
my $MARGIN   = ($ENV{GCRA_MARGIN_MS} // 2) / 1000;    # planned times keep this far from boundaries
my $DELAY_TOL = 5;       # ms

my $seed = defined $ENV{GCRA_SEED} ? $ENV{GCRA_SEED} : (int(time * 1000) ^ $$) % 100000;
diag("trace seed $seed (GCRA_SEED=$seed repeats it)");
srand($seed);

# option name => (limit_req's parameters, the module's, the model's delay)
my @OPTIONS = (
    [ none    => "burst=$BURST",                 0 ],
    [ nodelay => "burst=$BURST nodelay",         'nodelay' ],
    [ delay   => "burst=$BURST delay=$DELAY_M",  $DELAY_M ],
);

my $t = RateLimitTest->new(workers => 1);
$t->start_redis;
my $locations = '';
for my $o (@OPTIONS) {
    my ($name, $params) = @$o;
    $locations .= "    location /lr-$name/ { limit_req zone=lr $params; limit_req_status 429; alias %%TMP%%/html/; }\n";
    $locations .= "    location /rl-$name/ { ratelimit zone=g $params; alias %%TMP%%/html/; }\n";
}
$t->write_conf(<<"EOC" . $locations . "}\n");
log_format trace '\$http_x_id \$status lrs=\$limit_req_status rs=\$ratelimit_status rd=\$ratelimit_delay rt=\$request_time msec=\$msec';
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=1s;
ratelimit_zone g key=\$http_x_subject rate=${RATE}r/s algorithm=gcra;
limit_req_zone \$http_x_subject zone=lr:1m rate=${RATE}r/s;
server {
    listen 127.0.0.1:%%PORT%%;
    access_log %%TMP%%/trace.log trace;
EOC
$t->start_nginx;

# every location serves (limit_req and the module accept the same parameters)
{
    my @r = play([ map { { at => 0, port => $t->port, path => "/$_/index.html",
        headers => { 'X-Subject' => "warm-$_", 'X-Id' => "warm-$_" } } }
        map { ("lr-$_->[0]", "rl-$_->[0]") } @OPTIONS ]);
    is(join(' ', map { $_->{status} } @r), join(' ', (200) x @r), 'warm-up: every location answers 200');
}

# --- the trace -----------------------------------------------------------------

# Planned times of one subject under one option, kept $MARGIN from the
# boundaries of limit_req's arithmetic.
sub subject_times {
    my ($delay) = @_;
    my $m = model_new(rate => $RATE, burst => $BURST, delay => $delay);
    my @at;
    my $at = rand 0.5;
    my $place = sub {
        my ($c) = @_;
        for (1 .. 40) {
            my %try = %$m;
            my $d = model_decide(\%try, $c);
            if ($d->{margin} >= $MARGIN) { %$m = %try; push @at, $c; return $c }
            $c += $MARGIN + rand 0.005;
        }
        die "no time found near $c\n";
    };
    while ($at < $SPAN) {
        my $p = rand;
        if ($p < 0.35) {
            my $k = 3 + int rand 8;
            for (1 .. $k) { $at = $place->($at) + 0.004 + rand 0.021 }
        } elsif ($p < 0.7) {
            my $k = 4 + int rand 9;
            for (1 .. $k) { $at = $place->($at) + $T * (0.7 + rand 0.7) }
        } else {
            $at += 0.3 + rand 1.7;
        }
    }
    return grep { $_ < $SPAN } @at;
}

my @plan;
my %planned;    # id => planned offset
for my $o (@OPTIONS) {
    my ($name, undef, $delay) = @$o;
    for my $s (1 .. $SUBJECTS) {
        my @at = subject_times($delay);
        for my $i (0 .. $#at) {
            my $id = "$name.s$s.$i";
            $planned{$id} = $at[$i];
            for my $w (qw(lr rl)) {
                push @plan, { at => $at[$i], port => $t->port, path => "/$w-$name/index.html",
                    headers => { 'X-Subject' => "$name-s$s", 'X-Id' => "$w:$id" },
                    id => $id, w => $w, option => $name };
            }
        }
    }
}
note(sprintf 'trace: %d requests per location, %d in all', @plan / 6, scalar @plan);

my @res = play(\@plan, timeout => 5);
my $start = $res[0]{start};

my @bad = grep { $_->{err} || !$_->{status} } @res;
is(scalar @bad, 0, 'every request of the trace was answered')
    or diag(join "\n", map { "$_->{headers}{'X-Id'}: $_->{err}" } @bad[0 .. ($#bad < 9 ? $#bad : 9)]);
my ($late) = sort { $b <=> $a } map { $_->{sent} - $start - $_->{at} } @res;
note(sprintf 'client: latest write %.1f ms after its planned time', $late * 1000);

# --- nginx's account of each request ----------------------------------------------

my %log;    # "lr:id" => entry
my $want = @plan;
my $deadline = time + 5;
while (1) {
    %log = ();
    for (split /\n/, _read_file($t->tmp . '/trace.log')) {
        next unless /^(\S+) (\d+) lrs=(\S+) rs=(\S+) rd=(\S+) rt=([\d.]+) msec=([\d.]+)$/;
        $log{$1} = { status => $2, lrs => $3, rs => $4, rd => $5, rt => $6 * 1000, arrived => $7 - $6 };
    }
    last if keys %log >= $want + 6 || time > $deadline;
    sleep 0.1;
}
is(scalar(grep { !$log{"$_->{w}:$_->{id}"} } @res), 0, 'every request is in the access log');

sub outcome {
    my ($w, $e) = @_;
    return 'missing' unless $e;
    return 'rejected' if $e->{status} == 429;
    return "status $e->{status}" if $e->{status} != 200;
    if ($w eq 'lr') {
        return $e->{lrs} eq 'DELAYED' ? 'delayed' : $e->{lrs} eq 'PASSED' ? 'once' : "lrs $e->{lrs}";
    }
    return "rs $e->{rs}" unless $e->{rs} eq 'PASSED';
    return $e->{rd} =~ /^\d+$/ && $e->{rd} > 0 ? 'delayed' : 'once';
}

my %sent = map { ("$_->{w}:$_->{id}" => $_->{sent} - $start) } @res;

for my $o (@OPTIONS) {
    my ($name, $params, $delay) = @$o;
    my @ids = sort { $planned{$a} <=> $planned{$b} } grep { /^\Q$name\E\./ } keys %planned;
    my (%n, @diff, @ddiff, @waited);
    my %model = map { ("$name-s$_" => model_new(rate => $RATE, burst => $BURST, delay => $delay)) } 1 .. $SUBJECTS;
    my ($agree, $both_delayed) = (0, 0);
    my (%prev_dev, %diverged);    # per subject: the last request's lateness; a difference its state carries
    for my $id (@ids) {
        my ($s) = $id =~ /^\Q$name\E\.(s\d+)\./;
        my $mod = $model{"$name-$s"};
        # after a difference the two states are one turn apart until the
        # subject's backlog is gone in both
        delete $diverged{$s} if $diverged{$s} && $planned{$id} > $mod->{tat} + $T + 0.002;
        my $m = model_decide($mod, $planned{$id});
        my ($lr, $rl) = ($log{"lr:$id"}, $log{"rl:$id"});
        my ($lo, $ro) = (outcome('lr', $lr), outcome('rl', $rl));
        $n{$lo}++;
        my $line = sprintf '%-18s planned %8.1f ms  sent lr %8.1f rl %8.1f  arrived lr %8.0f rl %8.0f  '
            . 'model %s (margin %.1f ms)  limit_req %s %s  module %s %s rd=%s',
            $id, $planned{$id} * 1000, $sent{"lr:$id"} * 1000, $sent{"rl:$id"} * 1000,
            $lr ? ($lr->{arrived} - $start) * 1000 : -1, $rl ? ($rl->{arrived} - $start) * 1000 : -1,
            $m->{outcome}, $m->{margin} * 1000, $lo, $lr ? "$lr->{rt}ms" : '-', $ro, $rl ? "$rl->{rt}ms" : '-',
            $rl ? $rl->{rd} : '-';
        # how late each copy reached nginx against its plan, in ms (the
        # log's clock has milliseconds)
        my $dev = 1 + ($lr && $rl ? (sort { $b <=> $a } map { abs($_->{arrived} - $start - $planned{$id}) * 1000 }
            $lr, $rl)[0] : 0);
        my $why = $diverged{$s} ? "follows the difference of $diverged{$s}"
            : $m->{margin} * 1000 <= $dev + ($prev_dev{$s} // 0) + 1 ? 'on a boundary'
            : 'not on a boundary';
        $prev_dev{$s} = $dev;
        my $dd;
        if ($lo eq 'delayed' && $ro eq 'delayed') {
            $both_delayed++;
            # the module's delay: $ratelimit_delay (its $request_time adds
            # the Redis round trip, checked below); limit_req's: its
            # $request_time (a static file takes no measurable time)
            $dd = $rl->{rd} =~ /^\d+$/ ? abs($lr->{rt} - $rl->{rd}) : 1e9;
            push @ddiff, $dd;
        }
        if ($lo ne $ro || (defined $dd && $dd > $DELAY_TOL)) {
            push @diff, $line . (defined $dd ? "  (delays differ by $dd ms)" : '') . "  [$why]";
            $diverged{$s} //= $id;
            next;
        }
        push @waited, $rl if $lo eq 'delayed' && $rl->{rd} =~ /^\d+$/;
        $agree++;
    }
    my $total = @ids;
    my $pct = $total ? 100 * $agree / $total : 0;
    my @dd = sort { $a <=> $b } @ddiff;
    my $dmax = @dd ? $dd[-1] : 0;
    my $dmed = @dd ? $dd[ int($#dd / 2) ] : 0;
    note(sprintf '%s (%s): %d requests: limit_req %s; agreement %.2f%%; both delayed %d, |delay difference| median %d ms, max %d ms',
        $name, $params, $total, join(', ', map { "$_ $n{$_}" } sort keys %n), $pct, $both_delayed, $dmed, $dmax);

    # a trace that exercises every outcome the option has
    my $enough = ($n{rejected} // 0) >= 0.05 * $total && ($n{once} // 0) >= 0.05 * $total
        && ($delay eq 'nodelay' ? !$n{delayed} : ($n{delayed} // 0) >= 0.05 * $total);
    ok($enough && $total >= 200, "$name: the trace has $total requests, each outcome limit_req gives at least 5%")
        or diag(join ', ', map { "$_ $n{$_}" } sort keys %n);
    cmp_ok($pct, '>=', 99, sprintf '%s: %.2f%% of %d requests have the same outcome as limit_req, delays within %d ms',
        $name, $pct, $total, $DELAY_TOL);
    if (@diff) {
        diag("$name: " . scalar(@diff) . " difference(s):");
        diag("  $_") for @diff;
    }
    # where the module delayed a request, it waited that long: $request_time
    # is $ratelimit_delay plus the Redis round trip, never less; more by a
    # timer that fired late on a busy machine (5 ms for 99%, 50 ms for all)
    next if $delay eq 'nodelay';
    my @early = grep { $_->{rt} < $_->{rd} - 1 } @waited;
    my @slow  = grep { $_->{rt} > $_->{rd} + $DELAY_TOL } @waited;
    my @late  = grep { $_->{rt} > $_->{rd} + 50 } @waited;
    is(scalar @early, 0, sprintf '%s: no delayed request (%d) answered before its $ratelimit_delay', $name, scalar @waited)
        or diag(join ', ', map { "rd=$_->{rd} rt=$_->{rt}" } @early[0 .. ($#early < 9 ? $#early : 9)]);
    ok(@slow <= 0.01 * @waited && !@late,
        sprintf '%s: delayed requests took at most $ratelimit_delay + %d ms (%d over), + 50 ms (%d over)',
        $name, $DELAY_TOL, scalar @slow, scalar @late)
        or diag(join ', ', map { "rd=$_->{rd} rt=$_->{rt}" } @slow[0 .. ($#slow < 9 ? $#slow : 9)]);
}

# nothing went to the fail policy
my @err = grep { /^rl:/ && $log{$_}{rs} eq 'ERROR' } keys %log;
is(scalar @err, 0, 'no request of the module met a Redis error');

$t->stop_nginx;
$t->no_alerts;
done_testing;
