#!/usr/bin/perl
# The dashboard page (issue 45), `ratelimit_dashboard`, in a real browser:
# Debian's chromium, headless, driven through the DevTools protocol by a
# small client (Debian's python3-websocket).  Two nginx servers of two
# workers each share one Redis, under a load of ten subjects of which one,
# k3, sends ten times what the others do and is the only one its zone's
# limit refuses.
#
# Expected: GET and HEAD answer the page as text/html; charset=utf-8 with a
# Content-Security-Policy that lets it load nothing from elsewhere and
# connect to its own origin only; POST 405.  In the browser, within 10 s,
# the zone's top limited subjects show "no data" where the page's status
# location has no top list for the zone (answers 400); k3 first where it
# has one (the zone's top=).  Without delete=on and override=on, no button.
# The zone's chart moves (its points differ between two reads 4 s apart).
# The lookup box, typed into and clicked, shows the subject's used count
# (3 requests: 3), its Forgive button forgives it (used 0 after) and its
# Set button sets its override (the table then shows it).  The screenshot
# is a PNG.  No console message of level error, no exception, except the
# browser's own report of the 400 a top list answers where it has none.

use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use HTTP::Tiny;
use IO::Handle;
use IPC::Open2 qw(open2);
use JSON::PP qw(decode_json encode_json);
use Time::HiRes qw(sleep time);
use RateLimitTest qw(hdr);

RateLimitTest::require_module();
my $PYTHON = '/usr/bin/python3';
my $CHROMIUM = '/usr/bin/chromium';
plan skip_all => 'chromium not installed' unless -x $CHROMIUM;
plan skip_all => 'python3-websocket not installed'
    unless system($PYTHON, '-c', 'import websocket') == 0;

my $t  = RateLimitTest->new(workers => 2);
my $t2 = RateLimitTest->new(workers => 2);
my @SERVERS = ($t, $t2);
my $TMP = $t->tmp;
my $HEAVY = 'k3';

my $conf = <<'EOF';
ratelimit_redis 127.0.0.1:%%REDIS_PORT%% timeout=2s;
ratelimit_zone api key=$http_x_api_key limit=100 window=60s top=64;
ratelimit_zone slots key=$http_x_api_key concurrency=4 queue=8;
server {
    listen 127.0.0.1:%%PORT%% reuseport;
    location /api/ { ratelimit zone=api; alias %%TMP%%/html/; }
    location = /metrics { ratelimit_metrics; }
    location = /ratelimit { ratelimit_query zone=api delete=on override=on; }
    location = /dashboard { ratelimit_dashboard delete=on override=on; }
    location = /slots-status { ratelimit_query zone=slots; }
    location = /elsewhere {
        ratelimit_dashboard metrics=/metrics status=/slots-status;
    }
}
EOF
$t->write_conf($conf);
(my $conf2 = $conf) =~ s/%%REDIS_PORT%%/$t->redis_port/e;
$t2->write_conf($conf2);
$t->start_redis;
$_->start_nginx for @SERVERS;

# --- the page over HTTP ------------------------------------------------------

my $ua = HTTP::Tiny->new(timeout => 5);
my $page = $ua->get($t->url('/dashboard'));
is($page->{status}, 200, 'GET: 200');
is(hdr($page, 'Content-Type'), 'text/html; charset=utf-8', 'GET: text/html; charset=utf-8');
my $csp = hdr($page, 'Content-Security-Policy') // '';
like($csp, qr/default-src 'none'/, 'CSP: nothing loads by default');
like($csp, qr/connect-src 'self'/, "CSP: connects to its own origin only");
like($page->{content}, qr/data-metrics="\/metrics" data-status="\/ratelimit"/,
    'the default URIs: /metrics and /ratelimit');
unlike($page->{content}, qr/\b(?:src|href)=/, 'no src= or href=: it loads nothing');
my $head = $ua->request('HEAD', $t->url('/dashboard'));
is("$head->{status} " . length($head->{content} // ''), '200 0', 'HEAD: 200, no body');
is($ua->request('POST', $t->url('/dashboard'), { content => 'x' })->{status}, 405, 'POST: 405');
like($ua->get($t->url('/elsewhere'))->{content}, qr/data-status="\/slots-status" data-forgive="off"/,
    'status= is the page\'s, delete= off by default');

# --- the load ----------------------------------------------------------------

# Ten subjects: k3 20 requests a second, the nine others 1 each (60 a
# minute, below the zone's 100); alternating servers.
sub run_load {
    my $ua = HTTP::Tiny->new(timeout => 5, keep_alive => 1);
    for (my $i = 0; ; $i++) {
        my @keys = ($HEAVY);
        push @keys, grep { $_ ne $HEAVY } map { "k$_" } 0 .. 9 if $i % 20 == 0;
        for my $key (@keys) {
            $ua->get($SERVERS[$i % 2]->url('/api/index.html'),
                { headers => { 'X-Api-Key' => $key } });
        }
        sleep 0.05;
    }
}
my $load = $t->start_child('load', \&run_load);

$t->get('/api/index.html', { 'X-Api-Key' => 'quiet' }) for 1 .. 3;
my $rejecting = RateLimitTest::wait_until(sub {
    my $m = $ua->get($t->url('/metrics?format=json'));
    $m->{status} == 200 && decode_json($m->{content})->{limit_reqs}{api}{rejected} > 0;
}, 20);
ok($rejecting, "the load: $HEAVY rejected");

# --- the browser ---------------------------------------------------------------

# Chromium runs as root here, and its sandbox refuses root (it needs user
# namespaces or a setuid helper to drop privileges): --no-sandbox.  It
# loads only this test's pages.
mkdir "$TMP/chromium";
my $chromium = $t->_spawn('chromium', "$TMP/chromium.log", $CHROMIUM,
    '--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
    '--no-first-run', '--no-default-browser-check', '--disable-extensions',
    '--remote-debugging-port=0', "--user-data-dir=$TMP/chromium",
    '--window-size=1100,1300', 'about:blank');
my $port_file = "$TMP/chromium/DevToolsActivePort";
RateLimitTest::wait_until(sub { -s $port_file }, 20)
    or BAIL_OUT("chromium did not start: " . ($t->error_log // '') . `cat $TMP/chromium.log`);
my ($devtools) = split /\n/, `cat $port_file`;

RateLimitTest::_write_file("$TMP/cdp.py", <<'EOF');
# A DevTools protocol client for one page target: reads one JSON command a
# line from stdin, answers one JSON line, and gathers the page's console
# messages, exceptions and log entries meanwhile.
import base64, json, sys, time, urllib.request
import websocket

port = sys.argv[1]
for attempt in range(100):
    targets = json.load(urllib.request.urlopen(
        "http://127.0.0.1:%s/json/list" % port))
    pages = [t for t in targets if t["type"] == "page"]
    if pages:
        break
    time.sleep(0.1)
target = pages[0]
ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30,
                                 suppress_origin=True)
seen = []
ids = [0]

def note(m):
    p = m.get("params", {})
    if m.get("method") == "Runtime.consoleAPICalled":
        seen.append({"kind": "console", "level": p["type"],
                     "text": " ".join(str(a.get("value", a.get(
                         "description", ""))) for a in p["args"])})
    elif m.get("method") == "Runtime.exceptionThrown":
        d = p["exceptionDetails"]
        seen.append({"kind": "exception", "level": "error",
                     "text": d.get("exception", {}).get("description",
                                                        d["text"])})
    elif m.get("method") == "Log.entryAdded":
        e = p["entry"]
        seen.append({"kind": "log", "level": e["level"],
                     "source": e["source"], "text": e["text"],
                     "url": e.get("url", "")})

def call(method, **params):
    ids[0] += 1
    ws.send(json.dumps({"id": ids[0], "method": method, "params": params}))
    while True:
        m = json.loads(ws.recv())
        if m.get("id") == ids[0]:
            if "error" in m:
                raise RuntimeError(method + ": " + json.dumps(m["error"]))
            return m.get("result", {})
        note(m)

def evaluate(expr):
    r = call("Runtime.evaluate", expression=expr, returnByValue=True,
             awaitPromise=True)
    if "exceptionDetails" in r:
        raise RuntimeError(expr + ": " + r["exceptionDetails"]["text"])
    return r["result"].get("value")

def center(selector):
    return evaluate("(() => { const e = document.querySelector(%s);"
                    " e.scrollIntoView({block: 'center'});"
                    " const r = e.getBoundingClientRect();"
                    " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
                    % json.dumps(selector))

def click(selector):
    x, y = center(selector)
    for kind in ("mousePressed", "mouseReleased"):
        call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
             clickCount=1)

def run(cmd):
    op, args = cmd[0], cmd[1:]
    if op == "goto":
        call("Page.navigate", url=args[0])
        deadline = time.time() + 10
        while evaluate("document.readyState") != "complete":
            if time.time() > deadline:
                raise RuntimeError("not loaded: " + args[0])
            time.sleep(0.05)
        return True
    if op == "eval":
        return evaluate(args[0])
    if op == "type":
        click(args[0])
        call("Input.insertText", text=args[1])
        return True
    if op == "click":
        click(args[0])
        return True
    if op == "shot":
        data = call("Page.captureScreenshot", format="png",
                    captureBeyondViewport=True)["data"]
        with open(args[0], "wb") as f:
            f.write(base64.b64decode(data))
        return True
    if op == "seen":
        evaluate("0")           # events sent before it arrive before it
        out = list(seen)
        seen.clear()
        return out
    raise RuntimeError("no such command: " + op)

for domain in ("Runtime", "Log", "Page"):
    call(domain + ".enable")
for line in sys.stdin:
    try:
        print(json.dumps({"ok": run(json.loads(line))}), flush=True)
    except Exception as e:
        print(json.dumps({"error": str(e)}), flush=True)
EOF

my $cdp = open2(my $from_cdp, my $to_cdp, $PYTHON, "$TMP/cdp.py", $devtools);
$to_cdp->autoflush(1);
$RateLimitTest::Process::CHILDREN{$cdp} = 'cdp client';

# One command to the browser: its value, or undef with the error noted.
sub browser {
    my @cmd = @_;
    print {$to_cdp} encode_json(\@cmd), "\n";
    my $line = <$from_cdp>;
    die "the DevTools client ended\n" unless defined $line;
    my $r = decode_json($line);
    diag("$cmd[0]: $r->{error}") if exists $r->{error};
    return $r->{ok};
}

sub js { browser('eval', $_[0]) }

# Polls expression $expr until $ok->(its value); the value and the seconds
# it took, or the last value and undef.
sub wait_js {
    my ($expr, $ok, $timeout) = @_;
    my $t0 = time;
    my $v;
    while (time - $t0 < $timeout) {
        $v = js($expr);
        return ($v, time - $t0) if $ok->($v);
        sleep 0.2;
    }
    return ($v, undef);
}

my $FIRST_TOP = q{(() => { const c = document.querySelector(
    ".zone[data-zone='api'] table.top tbody tr td");
    return c ? c.textContent : null; })()};
my $POINTS = q{(() => { const z = document.querySelector(
    ".zone[data-zone='api'] polyline.admitted");
    return z ? z.getAttribute("points") : null; })()};

# The page whose status location has no top list for zone api.
browser('goto', $t->url('/elsewhere'));
my ($first, $took) = wait_js($FIRST_TOP, sub { ($_[0] // '') =~ /^no data/ }, 10);
ok(defined $took, "no top list for the zone: \"no data\"") or diag($first // 'no row');
browser('type', '#subject', 'quiet');
browser('click', '#lookup-button');
my ($cells) = wait_js(q{(() => { const t = document.getElementById("answer-table");
    return t ? t.querySelectorAll("td").length + " cells, "
               + t.querySelectorAll("button").length + " buttons" : null; })()},
    sub { defined $_[0] }, 5);
like($cells // '', qr/^\d+ cells, 0 buttons$/, 'without delete=on and override=on: no button')
    or diag($cells);

browser('goto', $t->url('/dashboard'));
($first, $took) = wait_js($FIRST_TOP, sub { ($_[0] // '') eq $HEAVY }, 10);
ok(defined $took, sprintf('the top limited subject, %s, first within 10 s (%.1f s)', $HEAVY, $took // -1))
    or diag($first // 'no row');

my ($points) = wait_js($POINTS, sub { ($_[0] // '') =~ / / }, 10);
sleep 4;
my $later = js($POINTS);
ok(defined $points && defined $later && $points ne $later, "the zone's chart moves")
    or diag("before: " . ($points // 'none') . "\nafter: " . ($later // 'none'));
my $rates = js(q{document.querySelector(".zone[data-zone='api'] .rates").textContent});
like($rates // '', qr/[1-9][0-9.]* rejected\/s/, "the zone rejects some a second") or diag($rates);
like(js(q{document.getElementById("link").textContent}) // '', qr/2 of 2 workers connected/,
    'the Redis link: both workers up');
like(js(q{document.querySelector("#concurrency tbody").textContent}) // '', qr/^slots0084$/,
    'the concurrency zone: none in flight, none queued, queue 8, limit 4');

# --- the lookup box and its buttons ------------------------------------------

my $USED = q{(() => { const c = document.querySelector(
    "#answer-table tr[data-zone='api'] td[data-field='used']");
    return c ? c.textContent : null; })()};
browser('type', '#subject', 'quiet');
browser('click', '#lookup-button');
my ($used) = wait_js($USED, sub { defined $_[0] }, 5);
is($used, 3, 'the lookup box: 3 used by the subject that made 3 requests');

browser('click', "#answer-table tr[data-zone='api'] button.forgive");
($used) = wait_js($USED, sub { ($_[0] // '') eq '0' }, 5);
is($used, 0, 'Forgive: the subject forgiven, 0 used');
like(js(q{document.getElementById("answer-note").textContent}) // '', qr/DELETE api: done/,
    'Forgive: the page says so');

browser('type', "#answer-table tr[data-zone='api'] input.override", '77');
browser('click', "#answer-table tr[data-zone='api'] button.set");
my ($override) = wait_js(q{(() => { const c = document.querySelector(
    "#answer-table tr[data-zone='api'] td[data-field='override']");
    return c ? c.textContent : null; })()}, sub { ($_[0] // '') eq '77' }, 5);
is($override, 77, 'Set: the override set, and shown');
my $r = $t2->get('/ratelimit?key=quiet');
like($r->{content}, qr/"limit":77/, 'Set: the other server applies it');

# --- the screenshot and the console --------------------------------------------

# DASHBOARD_SCREENSHOT=FILE keeps the screenshot (docs/dashboard.png),
# taken DASHBOARD_SCREENSHOT_WAIT seconds later (a longer chart).
my $shot = "$TMP/dashboard.png";
sleep($ENV{DASHBOARD_SCREENSHOT_WAIT} // 0);
browser('shot', $shot);
my $png = -s $shot ? RateLimitTest::_read_file($shot) : '';
ok(length($png) > 10_000 && substr($png, 0, 8) eq "\x89PNG\r\n\x1a\n",
    sprintf('the screenshot is a PNG (%d bytes)', length $png));
if (my $keep = $ENV{DASHBOARD_SCREENSHOT}) {
    RateLimitTest::_write_file($keep, $png);
}

my $seen = browser('seen') // [];
my @errors = grep {
    $_->{level} =~ /^(?:error|assert)$/
        && !($_->{kind} eq 'log' && $_->{source} eq 'network'
             && $_->{url} =~ m{/slots-status\?zone=api&top=10$}
             && $_->{text} =~ /status of 400/)
} @$seen;
is(scalar @errors, 0, sprintf('no console error (%d messages, the 400s of /elsewhere\'s top list aside)',
                              scalar @$seen))
    or diag(explain(\@errors));

close $to_cdp;
waitpid($cdp, 0);
delete $RateLimitTest::Process::CHILDREN{$cdp};
$t->stop_process($chromium);
$t->stop_process($load);
$_->stop_nginx for @SERVERS;
$_->no_alerts for @SERVERS;

done_testing;
