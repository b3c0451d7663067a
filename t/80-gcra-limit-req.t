#!/usr/bin/perl
# GCRA zones against nginx's own limit_req (issue 27): one nginx, one worker
# (so limit_req's per-worker state is all of its state), the same seeded
# random trace sent to a limit_req location and to the module's location
# with the same rate and burst.  Round 1: 10r/s burst=5, each of no option,
# nodelay, delay=2.  Round 2: 7r/s (an interval that is no whole number of
# milliseconds) without burst; two zones on a location (the subject's,
# 7r/s burst=3 delay=1, and its group's, 12r/s burst=6, two subjects a
# group), and the same with nodelay on one and delay=3 on the other:
# limit_req's several limit_req directives are all or nothing and wait
# the longest of their delays, as spec-27 says the module's are.
#
# Expected (spec-27, "same meaning as nginx's limit_req"): for at least 99%
# of the requests the outcome is the same (at once, delayed, rejected) and,
# where both delayed, the delays they chose agree within 5 ms plus how late
# Redis saw the request (limit_req's, computed from the excess its
# "delaying request" line logs; the module's $ratelimit_delay, counted from
# when Redis decided: see below); the module waits what
# $ratelimit_delay says: its $request_time is never less, and more by the
# Redis round trip and a timer's lateness only (median 2 ms, 95% within
# 5 ms, on a busy machine).
#
# Where they differ on a boundary, limit_req is the lenient one: it counts
# whole milliseconds of its cached clock (floor(now) - floor(then)), so it
# admits a request up to 1 ms before its turn, 0.5 ms on average; the
# module counts microseconds of Redis time.  A difference at the reject
# boundary of a saturated run then shifts the later delays of that subject
# by one interval until its backlog is gone (tagged "follows"); so does a
# request decided a few ms apart by the two (an empty backlog restarts at
# each one's "now").  Such a divergence counts once, however many later
# requests it shifts: the figure measures agreement, not the length of a
# backlog, which the machine's load stretches.  Every difference is printed with
# its timings: the planned offset, when each copy was sent and reached
# nginx, and how far the planned time lies from a decision boundary of
# limit_req's arithmetic (t/lib/GcraTest.pm), so it can be explained.
#
# The trace: per option 5 subjects, each a random mix of bursts (3-10
# requests 4-25 ms apart), steady runs (4-12 requests 0.7-1.4 emission
# intervals apart) and pauses (0.3-2 s), over 12 s a round; GCRA_SEED=N
# repeats a run.  Its planned times keep 2 ms (GCRA_MARGIN_MS) from limit_req's boundaries (rejected /
# delayed) as computed on the planned times, so that the client's and the
# server's scheduling (a millisecond or two) does not decide outcomes; a
# request that still lands on a boundary is one of the differences printed.
# The two copies of a request are written at the same moment, one after the
# other, on connections opened beforehand; the copies of a round's three
# options go at once too (about 200 requests a second in all).

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(time sleep);
use RateLimitTest qw(percentile);
use RateLimitTest::Env qw(_read_file);
use GcraTest qw(play model_new model_decide_all);

RateLimitTest::require_module();

my $SUBJECTS  = 5;       # per option; subjects 1-2, 3-4 and 5 share a group
my $SPAN      = 12;      # seconds of trace per round
my $MARGIN    = ($ENV{GCRA_MARGIN_MS} // 2) / 1000;    # planned times keep this far from boundaries
my $DELAY_TOL = 5;       # ms

my $seed = defined $ENV{GCRA_SEED} ? $ENV{GCRA_SEED} : (int(time * 1000) ^ $$) % 100000;
diag("trace seed $seed (GCRA_SEED=$seed repeats it)");
srand($seed);

# Each option: limit_req's directives, the module's, and the zones of the
# model: [rate r/s, burst, delay (M or 'nodelay'), key (subject or group)].
my @ROUNDS = (
    [ # one zone, 10r/s burst=5: each of no option, nodelay, delay=2
        { name => 'none',    lr => 'limit_req zone=lr10 burst=5;',
          rl => 'ratelimit zone=g10 burst=5;',          zones => [[10, 5, 0, 'subject']] },
        { name => 'nodelay', lr => 'limit_req zone=lr10 burst=5 nodelay;',
          rl => 'ratelimit zone=g10 burst=5 nodelay;',  zones => [[10, 5, 'nodelay', 'subject']] },
        { name => 'delay',   lr => 'limit_req zone=lr10 burst=5 delay=2;',
          rl => 'ratelimit zone=g10 burst=5 delay=2;',  zones => [[10, 5, 2, 'subject']] },
    ],
    [ # 7r/s (an interval of 142.857 ms): no burst; two zones (the subject's
      # and its group's, 12r/s), all or nothing, the longest wait
        { name => 'noburst', lr => 'limit_req zone=lr7;', rl => 'ratelimit zone=g7;',
          zones => [[7, 0, 0, 'subject']] },
        { name => 'two', lr => 'limit_req zone=lr7 burst=3 delay=1; limit_req zone=lrgrp burst=6;',
          rl => 'ratelimit zone=g7 burst=3 delay=1; ratelimit zone=ggrp burst=6;',
          zones => [[7, 3, 1, 'subject'], [12, 6, 0, 'group']] },
        { name => 'twonodelay', lr => 'limit_req zone=lr7 burst=4 nodelay; limit_req zone=lrgrp burst=8 delay=3;',
          rl => 'ratelimit zone=g7 burst=4 nodelay; ratelimit zone=ggrp burst=8 delay=3;',
          zones => [[7, 4, 'nodelay', 'subject'], [12, 8, 3, 'group']] },
    ],
);

my $t = RateLimitTest->new(workers => 1);
$t->start_redis;
my $locations = '';
for my $o (map { @$_ } @ROUNDS) {
    $locations .= "    location /lr-$o->{name}/ { $o->{lr} limit_req_status 429; alias %%TMP%%/html/; }\n";
    $locations .= "    location /rl-$o->{name}/ { $o->{rl} alias %%TMP%%/html/; }\n";
}
$t->write_conf(<<'EOC' . $locations . "}\n");
log_format trace '$http_x_id $status lrs=$limit_req_status rs=$ratelimit_status rd=$ratelimit_delay rt=$request_time msec=$msec';
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=1s;
ratelimit_zone g10  key=$http_x_subject rate=10r/s algorithm=gcra;
ratelimit_zone g7   key=$http_x_subject rate=7r/s algorithm=gcra;
ratelimit_zone ggrp key=$http_x_group rate=12r/s algorithm=gcra;
limit_req_zone $http_x_subject zone=lr10:1m rate=10r/s;
limit_req_zone $http_x_subject zone=lr7:1m rate=7r/s;
limit_req_zone $http_x_group zone=lrgrp:1m rate=12r/s;
server {
    listen 127.0.0.1:%%PORT%%;
    access_log %%TMP%%/trace.log trace;
EOC
$t->start_nginx;

# every location serves (limit_req and the module take the same parameters)
my @warm = map { ("lr-$_->{name}", "rl-$_->{name}") } map { @$_ } @ROUNDS;
{
    my @r = play([ map { { at => 0, port => $t->port, path => "/$_/index.html",
        headers => { 'X-Subject' => "warm-$_", 'X-Group' => "warm-$_", 'X-Id' => "warm-$_" } } } @warm ]);
    is(join(' ', map { $_->{status} } @r), join(' ', (200) x @r), 'warm-up: every location answers 200');
}

sub group_of { 'g' . int(($_[0] - 1) / 2) }

# The models of one request's zones (one state per zone and key).
sub models_for {
    my ($models, $o, $s) = @_;
    return [ map {
        my ($rate, $burst, $delay, $key) = @{ $o->{zones}[$_] };
        my $k = "$_:" . ($key eq 'group' ? group_of($s) : "s$s");
        $models->{$k} //= model_new(rate => $rate, burst => $burst, delay => $delay);
    } 0 .. $#{ $o->{zones} } ];
}

# Random times of one subject: bursts (3-10 requests 4-25 ms apart), steady
# runs (4-12 requests 0.7-1.4 intervals apart), pauses (0.3-2 s).
sub raw_times {
    my ($T) = @_;
    my @at;
    my $at = rand 0.5;
    while ($at < $SPAN) {
        my $p = rand;
        if ($p < 0.35) {
            for (1 .. 3 + int rand 8) { push @at, $at; $at += 0.004 + rand 0.021 }
        } elsif ($p < 0.7) {
            for (1 .. 4 + int rand 9) { push @at, $at; $at += $T * (0.7 + rand 0.7) }
        } else {
            $at += 0.3 + rand 1.7;
        }
    }
    return @at;
}

# The option's planned times, subject by subject: taken in time order over
# all subjects (a group's zone is shared), each kept $MARGIN from the
# boundaries of limit_req's arithmetic by moving its subject's rest later.
sub option_times {
    my ($o) = @_;
    my %q = map { ($_ => [ raw_times(1 / $o->{zones}[0][0]) ]) } 1 .. $SUBJECTS;
    my (%models, %out);
    while (1) {
        my ($s) = sort { $q{$a}[0] <=> $q{$b}[0] } grep { @{ $q{$_} } } keys %q;
        last unless defined $s;
        my $ms = models_for(\%models, $o, $s);
        my @try = map { +{ %$_ } } @$ms;
        my $d = model_decide_all(\@try, $q{$s}[0]);
        if ($d->{margin} >= $MARGIN || ++$out{tries}{$s} > 40) {
            %{ $ms->[$_] } = %{ $try[$_] } for 0 .. $#try;
            push @{ $out{$s} }, shift @{ $q{$s} };
            $out{tries}{$s} = 0;
            next;
        }
        my $shift = $MARGIN + rand 0.005;
        $_ += $shift for @{ $q{$s} };
    }
    return map { ($_ => [ grep { $_ < $SPAN } @{ $out{$_} // [] } ]) } 1 .. $SUBJECTS;
}

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

# limit_req's delay of each request it delayed, in ms, as it computes it
# (ngx_http_limit_req_account): (excess - delay) x 1000 / rate, in its
# units (thousandths of a request, of a request per second), from the
# excess and the zone its "delaying request" line names, the zone of the
# longest delay.  Its $request_time adds its timer's lateness.
my %LR_ZONES = (lr10 => [10, 0], lr7 => [7, 0], lrgrp => [12, 1]);  # rate, zone index
my %OPTION = map { ($_->{name} => $_) } map { @$_ } @ROUNDS;

sub lr_delays {
    my %delay;
    for ($t->error_log =~ /^.*delaying request, excess: .*$/mg) {
        next unless /excess: (\d+)\.(\d{3}), by zone "(\w+)".*request: "GET \/lr-(\w+)\/index\.html\?id=(\S+) /;
        my ($excess, $zone, $id) = ($1 * 1000 + $2, $3, $5);
        my ($rate, $z) = @{ $LR_ZONES{$zone} };
        my $d = $OPTION{$4}{zones}[$z][2];
        $delay{$id} = int(($excess - $d * 1000) * 1000 / ($rate * 1000));
    }
    return %delay;
}

sub read_log {
    my %log;
    for (split /\n/, _read_file($t->tmp . '/trace.log')) {
        next unless /^(\S+) (\d+) lrs=(\S+) rs=(\S+) rd=(\S+) rt=([\d.]+) msec=([\d.]+)$/;
        $log{$1} = { status => $2, lrs => $3, rs => $4, rd => $5, rt => $6 * 1000, arrived => $7 - $6 };
    }
    return \%log;
}

for my $round (@ROUNDS) {
    my (@plan, %planned, %subject_of);
    for my $o (@$round) {
        my %times = option_times($o);
        for my $s (1 .. $SUBJECTS) {
            my @at = @{ $times{$s} };
            for my $i (0 .. $#at) {
                my $id = "$o->{name}.s$s.$i";
                $planned{$id} = $at[$i];
                $subject_of{$id} = $s;
                for my $w (qw(lr rl)) {
                    push @plan, { at => $at[$i], port => $t->port, path => "/$w-$o->{name}/index.html?id=$id",
                        headers => { 'X-Subject' => "$o->{name}-s$s", 'X-Group' => "$o->{name}-" . group_of($s),
                                     'X-Id' => "$w:$id" },
                        id => $id, w => $w };
                }
            }
        }
    }
    my $rname = join ', ', map { $_->{name} } @$round;
    note(sprintf 'round %s: %d requests per location, %d in all', $rname, @plan / 2 / @$round, scalar @plan);

    my @res = play(\@plan, timeout => 5);
    my $start = $res[0]{start};
    my @bad = grep { $_->{err} || !$_->{status} } @res;
    is(scalar @bad, 0, "round $rname: every request was answered")
        or diag(join "\n", map { "$_->{headers}{'X-Id'}: $_->{err}" } @bad[0 .. ($#bad < 9 ? $#bad : 9)]);
    my ($late) = sort { $b <=> $a } map { $_->{sent} - $start - $_->{at} } @res;
    note(sprintf 'client: latest write %.1f ms after its planned time', $late * 1000);

    my $log;
    RateLimitTest::wait_until(sub { $log = read_log(); !grep { !$log->{"$_->{w}:$_->{id}"} } @res }, 5);
    is(scalar(grep { !$log->{"$_->{w}:$_->{id}"} } @res), 0, "round $rname: every request is in the access log");
    my %lr_delay = lr_delays();
    my %sent = map { ("$_->{w}:$_->{id}" => $_->{sent} - $start) } @res;

    for my $o (@$round) {
        my $name = $o->{name};
        my $params = $o->{rl};
        my @ids = sort { $planned{$a} <=> $planned{$b} } grep { /^\Q$name\E\./ } keys %planned;
        my (%n, @diff, @ddiff, @waited, @lr_late, %models, %prev_dev, %diverged);
        my ($diverged_count, $both_delayed) = (0, 0);
        my %extra;    # a subject's last module request: $request_time - $ratelimit_delay
        for my $id (@ids) {
            my $s = $subject_of{$id};
            my $ms = models_for(\%models, $o, $s);
            my @keys = map { "$_:" . ($o->{zones}[$_][3] eq 'group' ? group_of($s) : "s$s") } 0 .. $#$ms;
            # after a difference the two states of its zones are a turn apart
            # until their backlogs are gone in both
            for my $j (0 .. $#keys) {
                delete $diverged{ $keys[$j] } if $diverged{ $keys[$j] }
                    && $planned{$id} > $ms->[$j]{tat} + $ms->[$j]{T} + 0.002;
            }
            my ($follows) = grep { defined } map { $diverged{$_} } @keys;
            my $m = model_decide_all($ms, $planned{$id});
            my ($lr, $rl) = ($log->{"lr:$id"}, $log->{"rl:$id"});
            my ($lo, $ro) = (outcome('lr', $lr), outcome('rl', $rl));
            $n{$lo}++;
            my $line = sprintf '%-20s planned %8.1f ms  sent lr %8.1f rl %8.1f  arrived lr %8.0f rl %8.0f  '
                . 'model %s (margin %.1f ms)  limit_req %s %s  module %s %s rd=%s',
                $id, $planned{$id} * 1000, $sent{"lr:$id"} * 1000, $sent{"rl:$id"} * 1000,
                $lr ? ($lr->{arrived} - $start) * 1000 : -1, $rl ? ($rl->{arrived} - $start) * 1000 : -1,
                $m->{outcome}, $m->{margin} * 1000, $lo,
                $lr ? "$lr->{rt}ms" . (defined $lr_delay{$id} ? " (chose $lr_delay{$id})" : '') : '-',
                $ro, $rl ? "$rl->{rt}ms" : '-',
                $rl ? $rl->{rd} : '-';
            # how late each copy reached nginx against its plan, in ms (the
            # log's clock has milliseconds)
            my $dev = 1 + ($lr && $rl ? (sort { $b <=> $a } map { abs($_->{arrived} - $start - $planned{$id}) * 1000 }
                $lr, $rl)[0] : 0);
            my $why = $follows ? "follows the difference of $follows"
                : $m->{margin} * 1000 <= $dev + ($prev_dev{$s} // 0) + 1 ? 'on a boundary'
                : 'not on a boundary';
            $prev_dev{$s} = $dev;
            my $dd;
            # The module decides by Redis's clock, when its call reaches
            # Redis, and counts $ratelimit_delay from then; an empty backlog
            # restarts at that "now".  So its delay may differ from the one
            # limit_req chose at the arrival by how late Redis saw this
            # request or the one before it that set the subject's state: at
            # most what nginx measured besides the delay, $request_time -
            # $ratelimit_delay (the round trip and the timer's lateness; well
            # under a ms on an idle machine, a time slice or two on a busy
            # one).
            my $extra = $rl && $rl->{rd} =~ /^\d+$/ ? $rl->{rt} - $rl->{rd} : 0;
            my $tol = $DELAY_TOL + ($extra > ($extra{$s} // 0) ? $extra : $extra{$s} // 0);
            $extra{$s} = $extra;
            if ($lo eq 'delayed' && $ro eq 'delayed') {
                $both_delayed++;
                $dd = $rl->{rd} =~ /^\d+$/ && defined $lr_delay{$id}
                    ? abs($lr_delay{$id} - $rl->{rd}) : 1e9;
                push @ddiff, $dd;
            }
            if ($lo ne $ro || (defined $dd && $dd > $tol)) {
                push @diff, $line . (defined $dd ? "  (delays differ by $dd ms, more than $tol)" : '') . "  [$why]";
                $diverged_count++ unless $follows;
                $diverged{$_} //= $id for @keys;
                next;
            }
            push @waited, $rl if $lo eq 'delayed' && $rl->{rd} =~ /^\d+$/;
            push @lr_late, $lr->{rt} - $lr_delay{$id} if $lo eq 'delayed' && defined $lr_delay{$id};
        }
        my $total = @ids;
        my $pct = $total ? 100 * ($total - $diverged_count) / $total : 0;
        my @dd = sort { $a <=> $b } @ddiff;
        my $dmax = @dd ? $dd[-1] : 0;
        my $dmed = @dd ? $dd[ int($#dd / 2) ] : 0;
        note(sprintf '%s (%s): %d requests: limit_req %s; agreement %.2f%%; both delayed %d, |delay difference| median %d ms, max %d ms',
            $name, $params, $total, join(', ', map { "$_ $n{$_}" } sort keys %n), $pct, $both_delayed, $dmed, $dmax);

        # a trace that exercises every outcome the option has
        my $can_delay = grep { $_->[2] ne 'nodelay' && $_->[1] > $_->[2] } @{ $o->{zones} };
        my $enough = ($n{rejected} // 0) >= 0.05 * $total && ($n{once} // 0) >= 0.05 * $total
            && ($can_delay ? ($n{delayed} // 0) >= 0.05 * $total : !$n{delayed});
        ok($enough && $total >= 200, "$name: the trace has $total requests, each outcome limit_req gives at least 5%")
            or diag(join ', ', map { "$_ $n{$_}" } sort keys %n);
        cmp_ok($pct, '>=', 99, sprintf '%s: %.2f%% of %d requests have the same outcome as limit_req, delays within %d ms'
            . ' + how late Redis saw them (%d divergences, %d differences)', $name, $pct, $total, $DELAY_TOL,
            $diverged_count, scalar @diff);
        if (@diff) {
            diag("$name: " . scalar(@diff) . " difference(s):");
            diag("  $_") for @diff;
        }
        next unless $can_delay;
        # where the module delayed a request, it waited that long: $request_time
        # is $ratelimit_delay plus the Redis round trip, never less; more by
        # a timer that fired late.  How late nginx's timers fire is the
        # machine's (a loaded core's time slices), and limit_req's delayed
        # requests of this run measure it: its $request_time less the delay
        # it chose.  The module's median is within 2 ms of limit_req's, and
        # its 95th percentile within 5 ms (the round trip) of limit_req's:
        # on an idle machine, where limit_req's timers are on time, 2 and
        # 5 ms as before
        my @early = grep { $_->{rt} < $_->{rd} - 1 } @waited;
        my @over = sort { $a <=> $b } map { $_->{rt} - $_->{rd} } @waited;
        my @lr_over = sort { $a <=> $b } @lr_late;
        my ($med, $p95) = map { percentile($_, @over) // 0 } 50, 95;
        my ($lr_med, $lr_p95) = map { percentile($_, @lr_over) // 0 } 50, 95;
        is(scalar @early, 0, sprintf '%s: no delayed request (%d) answered before its $ratelimit_delay', $name, scalar @waited)
            or diag(join ', ', map { "rd=$_->{rd} rt=$_->{rt}" } @early[0 .. ($#early < 9 ? $#early : 9)]);
        ok(@waited && @lr_over && $med <= $lr_med + 2 && $p95 <= $lr_p95 + $DELAY_TOL,
            sprintf '%s: %d delayed requests took $ratelimit_delay + %d ms (median), + %d ms (95%%), the most + %d ms;'
            . ' limit_req\'s %d its chosen delay + %d ms, + %d ms, + %d ms', $name, scalar @waited, $med, $p95,
            @over ? $over[-1] : 0, scalar @lr_over, $lr_med, $lr_p95, @lr_over ? $lr_over[-1] : 0);
    }
}

# nothing went to the fail policy
my $log = read_log();
my @err = grep { /^rl:/ && $log->{$_}{rs} eq 'ERROR' } keys %$log;
is(scalar @err, 0, 'no request of the module met a Redis error');

$t->stop_nginx;
$t->no_alerts;
done_testing;
