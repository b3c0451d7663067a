#!/usr/bin/perl
# Bad input: randomly mutated configurations of the module's directives.
#
# Expected: "nginx -t" never crashes (no signal, no "Segmentation fault", no
# core dump, no C++ exception text) nor hangs; it exits 0 or 1; every failure
# prints an [emerg] with "nginx.conf:LINE" (or "in /path:LINE") where LINE is
# a line of the file; every success prints "test is successful"; the
# unmutated base configurations all pass.  A few accepted variants are also
# run against Redis: one request each, no worker crash.
#
# The RNG seed is printed; rerun with FUZZ_SEED=<seed> (and FUZZ_N=<count>).

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use FaultTest;

RateLimitTest::require_module();

my $t = FaultTest->new(workers => 1);

my $SEED = $ENV{FUZZ_SEED} // ((time() * 1000) ^ ($$ << 8)) % 2147483647;
srand($SEED);
diag("config fuzz seed: $SEED (rerun with FUZZ_SEED=$SEED)");
my $N        = $ENV{FUZZ_N} // 400;
my $PARALLEL = 2;
my $RUNTIME  = 3;    # accepted variants also run for real

my $RP   = $t->redis_port;
my $PORT = $t->port('PORT');
my $MOD  = RateLimitTest::module_path();
my $TMP  = $t->tmp;

# ---------------------------------------------------------------------------
# helpers (local to this file)

sub pick { $_[ int rand @_ ] }
sub chance { rand() < $_[0] }

sub u8 { my $s = shift; utf8::encode($s); $s }

my @ODD = (
    '', '0', '-1', '1', '00', '+5', '007', '4294967296', '9223372036854775807', '9223372036854775808',
    '18446744073709551615', '18446744073709551616', '9' x 40, '1e9', '0x10', '1.5', 'abc',
    u8("\x{fc}"), u8("\x{65e5}\x{672c}\x{8a9e}"), u8("\x{1F600}"), u8("z\x{301}"), "\xff\xfe", "\x01\x02",
    '"', "'", '\\', '$', '$nosuch_variable', '${http_x', '$http_x_api_key', '$binary_remote_addr$arg_k',
    ' ', 'a b', '#', '{', '}', ';', '=', '==', 'key=', 'zone=', 'dry_run', 'DRY_RUN',
    '1ms', '0ms', '0s', '1s', '-1s', '1x', '999999999999999d', '9223372036854775807ms', '1y', '1M',
    '10r/s', '0r/s', '1r/x', 'r/s', '-5r/s', '1.5r/s', '18446744073709551616r/s', '9007199254740993r/s',
    '9007199254740992r/d', '1r/ms', 'on', 'off', 'ON', 'yes', 'open', 'closed', 'info', 'crit', 'debug',
    '429', '200', '399', '400', '599', '600', '-429', 'x' x 300, 'y' x 5000, "tab\there", "new\nline",
    'unix:', 'unix:/nonexistent/dir/sock', '127.0.0.1:0', '127.0.0.1:99999', '127.0.0.1:', ':6379',
    '[::1]:6379', '[::1', 'localhost', '127.0.0.1:6379:1', 'sliding', 'fixed', 'Fixed', 'leaky',
);

my @ZN = ('api', 'z2', 'z-3', 'z.4');

sub opt_directives {
    my ($level) = @_;
    my @d;
    push @d, ['ratelimit_status', pick(429, 503, 400, 599, 418)] if chance(0.3);
    push @d, ['ratelimit_fail', @{ pick(['open'], ['closed'], ['closed', 'status=429'], ['local'],
        ['local', 'servers=' . (1 + int rand 4)]) }] if chance(0.3);
    push @d, ['ratelimit_log_level', pick('info', 'notice', 'warn', 'error')] if chance(0.3);
    push @d, ['ratelimit_dry_run', pick('on', 'off')] if chance(0.2);
    push @d, ['ratelimit_headers', pick('on', 'off')] if chance(0.3);
    push @d, ['ratelimit_peek_header', pick('X-Peek', 'X-RateLimit-Peek')] if chance(0.15);
    return @d;
}

# A random valid configuration: { http => [...], srv => [...], loc => [...] },
# each directive an array [name, args...].
sub base_variant {
    my %v = (http => [], srv => [], loc => []);
    my @redis = ('ratelimit_redis', "127.0.0.1:$RP");
    push @redis, 'db=' . int(rand 16) if chance(0.3);
    push @redis, 'user=' . pick('u', 'rluser') if chance(0.15);
    push @redis, 'password=' . pick('p', 'secret') if chance(0.2) || grep { /^user=/ } @redis;
    push @redis, 'timeout=' . pick('50ms', '1s', '100ms', '2s') if chance(0.5);
    push @redis, 'connect_timeout=' . pick('1s', '200ms') if chance(0.3);
    @redis = ($redis[0], $redis[1], sort { rand() <=> 0.5 } @redis[2 .. $#redis]);
    push @{ $v{http} }, \@redis;
    push @{ $v{http} }, ['ratelimit_prefix', pick('rl', 'myapp', 'x-y.z')] if chance(0.3);

    my $nz = 1 + int rand 3;
    for my $i (0 .. $nz - 1) {
        my @z = ('ratelimit_zone', $ZN[$i],
            'key=' . pick('$http_x_api_key', '$binary_remote_addr', '$arg_k', '$host:$http_x_api_key', '$uri'));
        my $fixed = chance(0.25);
        if (chance(0.5)) {
            push @z, 'rate=' . pick('10r/s', '5r/m', '1r/h', '100r/d');
        } else {
            push @z, 'limit=' . (1 + int rand 100), 'window=' . pick('1s', '60s', '1m', '500ms');
            push @z, 'bucket=' . pick('100ms', '250ms', '500ms') if !$fixed && chance(0.3);
        }
        push @z, 'algorithm=' . ($fixed ? 'fixed' : 'sliding') if $fixed || chance(0.1);
        push @z, 'lease=' . pick('64k', '1m') if chance(0.2);
        @z = (@z[0, 1], sort { rand() <=> 0.5 } @z[2 .. $#z]);
        push @{ $v{http} }, \@z;
    }
    for my $level (qw(http srv loc)) {
        my @names = sort { rand() <=> 0.5 } @ZN[0 .. $nz - 1];
        my $refs = $level eq 'loc' ? 1 + int rand 2 : (chance(0.3) ? 1 : 0);
        $refs = @names if $refs > @names;
        push @{ $v{$level} }, ['ratelimit', "zone=$_", (chance(0.2) ? 'dry_run' : ())] for @names[0 .. $refs - 1];
        push @{ $v{$level} }, opt_directives($level);
    }
    return \%v;
}

sub all_directives {
    my ($v) = @_;
    return map { my $l = $_; map { [$l, $_] } @{ $v->{$l} } } qw(http srv loc);
}

# Mutations: each returns a description.
sub mutate {
    my ($v) = @_;
    my @d = all_directives($v);
    my ($level, $dir) = @{ pick(@d) };
    my $name = $dir->[0];
    my $op = pick(qw(value value value pname drop drop_all dup_arg dup_dir move remove add_arg rename syntax));
    if ($op eq 'value' && @$dir > 1) {
        my $i = 1 + int rand(@$dir - 1);
        if ($dir->[$i] =~ /^([a-z_]+=)/ && chance(0.8)) { $dir->[$i] = $1 . pick(@ODD) }
        else { $dir->[$i] = pick(@ODD) }
        return "$name: arg $i -> " . _show($dir->[$i]);
    }
    if ($op eq 'pname' && @$dir > 1) {
        my $i = 1 + int rand(@$dir - 1);
        my ($val) = $dir->[$i] =~ /=(.*)$/s;
        $val //= $dir->[$i];
        $dir->[$i] = pick('foo', '', 'KEY', 'key ', ' key', 'zone', 'Zone', 'limit', 'window', 'rate', 'db',
            'bucket', 'algorithm', 'timeout', 'password', 'user', 'dry_run', 'connect_timeout', u8("\x{430}"), '=') . '=' . $val;
        return "$name: param $i renamed -> " . _show($dir->[$i]);
    }
    if ($op eq 'drop' && @$dir > 1) {
        my $i = 1 + int rand(@$dir - 1);
        my ($gone) = splice @$dir, $i, 1;
        return "$name: dropped " . _show($gone);
    }
    if ($op eq 'drop_all') {
        splice @$dir, 1;
        return "$name: no arguments";
    }
    if ($op eq 'dup_arg' && @$dir > 1) {
        my $i = 1 + int rand(@$dir - 1);
        splice @$dir, 1 + int rand(@$dir), 0, $dir->[$i];
        return "$name: duplicated " . _show($dir->[$i]);
    }
    if ($op eq 'dup_dir') {
        push @{ $v->{$level} }, [@$dir];
        return "$name: duplicated in $level";
    }
    if ($op eq 'move') {
        my $to = pick(grep { $_ ne $level } qw(http srv loc main events));
        @{ $v->{$level} } = grep { $_ != $dir } @{ $v->{$level} };
        push @{ $v->{$to} }, $dir;
        return "$name: moved $level -> $to";
    }
    if ($op eq 'remove') {
        @{ $v->{$level} } = grep { $_ != $dir } @{ $v->{$level} };
        return "$name: removed from $level";
    }
    if ($op eq 'add_arg') {
        push @$dir, pick(@ODD, 'foo=bar', 'db=1', 'timeout=1s', 'zone=api', 'dry_run', 'key=$uri', 'rate=1r/s');
        return "$name: extra arg " . _show($dir->[-1]);
    }
    if ($op eq 'rename') {
        $dir->[0] = pick($name . 's', uc $name, substr($name, 0, -1), 'ratelimit_', 'ratelimit-zone', $name . u8("\x{e9}"));
        return "$name: directive renamed -> $dir->[0]";
    }
    if ($op eq 'syntax') {
        my $s = pick('no_semicolon', 'brace', 'quote');
        push @$dir, "\0SYNTAX:$s";
        return "$name: syntax $s";
    }
    # op not applicable (no args): change a value elsewhere
    push @$dir, pick(@ODD);
    return "$name: extra arg " . _show($dir->[-1]);
}

sub _show {
    my $s = shift;
    $s = substr($s, 0, 40) . '...(' . length($s) . ')' if length $s > 40;
    $s =~ s/([^\x20-\x7e])/sprintf '\\x%02x', ord $1/ge;
    return "'$s'";
}

sub quote_arg {
    my ($a) = @_;
    return $a if length $a && $a !~ /[\s;{}"'\\#]/ && chance(0.9);
    if (chance(0.85)) {
        (my $q = $a) =~ s/(["\\])/\\$1/g;
        return qq{"$q"};
    }
    return $a;    # raw: may well break the syntax, which is fine too
}

sub render_dirs {
    my ($dirs, $indent) = @_;
    my $out = '';
    for my $d (@$dirs) {
        my ($name, @args) = @$d;
        my $syntax = '';
        @args = grep { /^\0SYNTAX:(.*)/ ? do { $syntax = $1; 0 } : 1 } @args;
        my $line = $indent . join ' ', $name, map { quote_arg($_) } @args;
        if    ($syntax eq 'no_semicolon') { $line .= "\n" }
        elsif ($syntax eq 'brace')        { $line .= " {\n" }
        elsif ($syntax eq 'quote')        { $line .= " \"unterminated;\n" }
        else                              { $line .= ";\n" }
        $out .= $line;
    }
    return $out;
}

sub render {
    my ($v, $dir) = @_;
    my $c = "load_module $MOD;\n";
    $c .= "user nobody nogroup;\n" if $> == 0;
    $c .= "worker_processes 1;\ndaemon off;\nmaster_process on;\n";
    $c .= "pid $dir/nginx.pid;\nerror_log $dir/error.log info;\n";
    $c .= render_dirs($v->{main} // [], '');
    $c .= "events {\n    worker_connections 256;\n" . render_dirs($v->{events} // [], '    ') . "}\n";
    $c .= "http {\n    access_log off;\n    default_type text/plain;\n";
    $c .= "    client_body_temp_path $dir/cb;\n    proxy_temp_path $dir/px;\n    fastcgi_temp_path $dir/fc;\n";
    $c .= "    uwsgi_temp_path $dir/uw;\n    scgi_temp_path $dir/sc;\n";
    $c .= render_dirs($v->{http}, '    ');
    $c .= "    server {\n        listen 127.0.0.1:$PORT;\n";
    $c .= render_dirs($v->{srv}, '        ');
    $c .= "        location / {\n            root $TMP/html;\n";
    $c .= render_dirs($v->{loc}, '            ');
    $c .= "        }\n    }\n}\n";
    return $c;
}

sub clone { my $v = shift; return { map { $_ => [ map { [@$_] } @{ $v->{$_} } ] } keys %$v } }

# ---------------------------------------------------------------------------
# generate

my @variants;
for my $i (0 .. $N - 1) {
    my $base = base_variant();
    my $v = clone($base);
    my @what;
    if ($i >= 20) {    # the first 20 stay unmutated: the generator's valid bases
        push @what, mutate($v) for 1 .. (1 + int rand 3);
    }
    push @variants, { v => $v, what => \@what, base => !@what };
}

# ---------------------------------------------------------------------------
# run nginx -t, $PARALLEL at a time

sub run_t {
    my ($i) = @_;
    my $dir = "$TMP/fz/$i";
    RateLimitTest::_mkpath($dir);
    my $text = render($variants[$i]{v}, $dir);
    RateLimitTest::_write_file("$dir/nginx.conf", $text);
    $variants[$i]{text}  = $text;
    $variants[$i]{dir}   = $dir;
    $variants[$i]{lines} = () = $text =~ /\n/g;
    my $pid = fork;
    die "fork: $!" unless defined $pid;
    if ($pid == 0) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', "$dir/out" or POSIX::_exit(126);
        open STDERR, '>&', \*STDOUT or POSIX::_exit(126);
        no warnings 'exec';
        exec { RateLimitTest::nginx_bin() } RateLimitTest::nginx_bin(), '-t', '-p', "$dir/", '-c', "$dir/nginx.conf", '-e', "$dir/err.log";
        POSIX::_exit(127);
    }
    $RateLimitTest::CHILDREN{$pid} = 'nginx -t';
    return $pid;
}

my $t0 = time;
{
    my %running;    # pid => [index, start]
    my $next = 0;
    while ($next < @variants || %running) {
        while ($next < @variants && keys(%running) < $PARALLEL) {
            $running{ run_t($next) } = [$next, time];
            $next++;
        }
        for my $pid (keys %running) {
            my ($i, $start) = @{ $running{$pid} };
            my $r = waitpid($pid, POSIX::WNOHANG());
            if ($r == $pid) {
                $variants[$i]{wait} = $?;
            } elsif (time - $start > 10) {
                kill 'KILL', $pid;
                waitpid($pid, 0);
                $variants[$i]{wait} = $?;
                $variants[$i]{hang} = 1;
            } else {
                next;
            }
            delete $running{$pid};
            delete $RateLimitTest::CHILDREN{$pid};
            my $dir = "$TMP/fz/$i";
            $variants[$i]{out} = RateLimitTest::_read_file("$dir/out") . RateLimitTest::_read_file("$dir/err.log");
        }
        sleep 0.002;
    }
}
note(sprintf 'ran nginx -t on %d variants in %.1fs', scalar @variants, time - $t0);

# ---------------------------------------------------------------------------
# check

sub report {
    my ($v) = @_;
    my $n = 0;
    my $conf = join '', map { sprintf "%3d| %s\n", ++$n, $_ } split /\n/, $v->{text};
    $conf =~ s/([^\x20-\x7e\n])/sprintf '\\x%02x', ord $1/ge;
    return "mutations: " . join('; ', @{ $v->{what} }) . "\n"
        . "wait status: $v->{wait}\noutput:\n$v->{out}\nconfig:\n$conf";
}

sub check {
    my ($name, $pred) = @_;
    my @bad = grep { !$pred->($_) } @variants;
    ok(!@bad, "$name (" . scalar(@variants) . ' variants)')
        or diag(scalar(@bad) . " failing, first ones:\n" . join("\n----\n", map { report($_) } @bad[0 .. ($#bad < 2 ? $#bad : 2)]));
}

my $CRASH = qr/Segmentation fault|core dumped|Aborted|AddressSanitizer|terminate called|std::|double free|corrupted|stack smashing/i;

check('nginx -t never hangs', sub { !$_[0]{hang} });
check('nginx -t never dies from a signal', sub { ($_[0]{wait} & 127) == 0 });
check('nginx -t output shows no crash', sub { $_[0]{out} !~ $CRASH });
check('nginx -t exits 0 or 1', sub { my $s = $_[0]{wait} >> 8; $s == 0 || $s == 1 });
check('every success says "test is successful"', sub {
    my $v = shift;
    ($v->{wait} >> 8) != 0 || $v->{out} =~ /test is successful/;
});
check('every failure prints an [emerg] naming nginx.conf:LINE or "in PATH:LINE", LINE within the file', sub {
    my $v = shift;
    return 1 if ($v->{wait} >> 8) == 0;
    my @loc;
    # messages may span lines (values with newlines): split before each message start
    for my $l (grep { /\[emerg\]/ } split /(?=^nginx: \[|^\d{4}\/\d\d\/\d\d \d\d:)/m, $v->{out}) {
        push @loc, $1 if $l =~ /nginx\.conf:(\d+)\s*$/;
        push @loc, $1 if $l !~ /nginx\.conf:\d+\s*$/ && $l =~ / in \S+:(\d+)\s*$/;
    }
    # (lines + 1: "unexpected end of file" is reported just past the last newline)
    # nginx itself resolves variables after parsing and reports an unknown
    # one without a location (limit_req_zone does the same): accepted only
    # when that is the whole story.
    return 1 if !@loc && $v->{out} =~ /\[emerg\] unknown "[^"\n]*" variable\n/ && $v->{text} =~ /\$/;
    return @loc && !(grep { $_ < 1 || $_ > $v->{lines} + 1 } @loc);
});
check('the unmutated base configurations pass', sub { !$_[0]{base} || ($_[0]{wait} >> 8) == 0 });

my @pass = grep { ($_->{wait} >> 8) == 0 } @variants;
my @fail = grep { ($_->{wait} >> 8) != 0 } @variants;
note(sprintf '%d accepted, %d rejected', scalar @pass, scalar @fail);
ok(@fail >= $N * 0.3, 'the fuzzer produced rejected variants (' . scalar(@fail) . ')');
ok(@pass - 20 >= 5, 'the fuzzer produced accepted mutated variants (' . (@pass - 20) . ')');

# ---------------------------------------------------------------------------
# run a few accepted mutated variants for real

$t->start_redis;
{
    my @cand = grep { !$_->{base} && ($_->{wait} >> 8) == 0 && $_->{text} =~ /ratelimit zone=/ } @variants;
    @cand = @cand[0 .. $RUNTIME - 1] if @cand > $RUNTIME;
    my $n = 0;
    for my $v (@cand) {
        $n++;
        # The text nginx -t passed, not a new rendering: quote_arg() picks
        # its quoting at random, and another pick can change the arguments.
        (my $text = $v->{text}) =~ s/\Q$v->{dir}\E/$TMP/g;
        $text =~ s/^error_log \S+ info;$/error_log $TMP\/error.log info;/m;
        RateLimitTest::_write_file($t->conf_path, $text);
        my $ok = eval { $t->start_nginx; 1 };
        ok($ok, "accepted variant $n starts") or do { diag($@ . report($v)); next };
        my @st;
        for my $k (1 .. 3) {
            my $r = $t->get("/index.html?k=v$n", { 'X-Api-Key' => "v$n" }, timeout => 5);
            # HTTP::Tiny's own 599 (no answer) has no Server header; a
            # variant may well say "ratelimit_status 599" itself
            push @st, $r->{status} . ($r->{headers}{server} ? '' : '/no answer');
        }
        ok(!(grep { m{/no answer} } @st), "accepted variant $n answers requests (@st)") or diag(report($v));
        $t->stop_nginx;
    }
}
$t->stop_redis;

$t->final_checks('no [alert] or [emerg] in the runtime error.log');
done_testing;
