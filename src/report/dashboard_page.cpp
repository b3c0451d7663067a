#include "report/dashboard_page.hpp"

#include <cstring>

namespace ratelimit {

namespace {

// The page.  @metrics@, @status@, @forgive@ and @override@ stand once each
// in <body> for what dashboard_page() writes there.  Every text that comes
// from a server (zone names, subjects, error messages) goes into the DOM
// as text, never as HTML: subjects are what clients sent.
constexpr const char kPage[] = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ratelimit</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1em 2em; color: #222; }
h1 { font-size: 1.4em; margin: 0; }
h2 { font-size: 1.15em; margin: 1.2em 0 0.4em; }
h3 { font-size: 1em; margin: 0 0 0.3em; }
header { display: flex; gap: 1em; align-items: baseline; }
.muted, .note { color: #666; font-size: 0.9em; }
.zone { border: 1px solid #ccc; border-radius: 4px; padding: 0.6em 1em;
        margin: 0 0 1em; }
.zone .rates { margin-left: 1em; }
svg.chart { display: block; width: 100%; max-width: 600px; height: 80px;
            background: #fafafa; border: 1px solid #eee; }
polyline { fill: none; stroke-width: 1.5; }
polyline.admitted { stroke: #2a7d2a; }
polyline.rejected { stroke: #c0392b; }
.admitted-text { color: #2a7d2a; }
.rejected-text { color: #c0392b; }
table { border-collapse: collapse; margin: 0.3em 0; }
th, td { border-bottom: 1px solid #ddd; padding: 2px 8px; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.up { color: #2a7d2a; }
.down { color: #c0392b; }
.connecting { color: #b8860b; }
.error { color: #c0392b; }
button.key { font: inherit; border: none; background: none; padding: 0;
             color: #1a4f8b; text-decoration: underline; cursor: pointer; }
input { font: inherit; }
</style>
</head>
<body data-metrics="@metrics@" data-status="@status@" data-forgive="@forgive@"
      data-override="@override@">
<header><h1>Rate limits</h1><span id="updated" class="muted">loading</span>
<span id="problem" class="error"></span></header>

<h2>Rate zones <span class="muted">(requests per second on this server;
top subjects across the fleet)</span></h2>
<div id="zones"></div>

<h2>Concurrency zones <span class="muted">(this server)</span></h2>
<table id="concurrency">
<thead><tr><th>zone</th><th>in flight</th><th>queued</th><th>queue limit</th>
<th>limit</th></tr></thead><tbody></tbody></table>

<h2>Redis link <span class="muted">(this server's workers)</span></h2>
<div id="link"></div>

<h2>Look up a subject</h2>
<form id="lookup">
<input id="subject" size="40" placeholder="subject: the zone's key, as text"
       autocomplete="off">
<button id="lookup-button" type="submit">Look up</button>
</form>
<p id="answer-note" class="note"></p>
<div id="answer"></div>

<script>
"use strict";
const cfg = document.body.dataset;
const PERIOD_MS = 2000;          // between two refreshes
const POINTS = 150;              // a chart's points: 5 minutes
const TOP = 10;                  // subjects asked of the top list
const SVG = "http://www.w3.org/2000/svg";
const series = new Map();        // zone -> {last, points: [[admitted/s,
                                 // rejected/s]]}
let zoneNames = "";

// An element with attributes and children (strings become text nodes).
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  e.append(...kids);
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

function num(v) { return el("td", {class: "num"}, String(v)); }

// The status and the parsed JSON body (null if none) of a request.
async function ask(method, url) {
  const r = await fetch(url, {method: method, cache: "no-store"});
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  return {status: r.status, body: body};
}

function why(a) {
  return a.body && a.body.error ? a.body.error : "HTTP " + a.status;
}

// What a zone let through (passed, dry-run rejections, errors let
// through) and refused (rejected, errors answered 503).
function tally(z) {
  return [z.passed + z.rejected_dry_run + z.error,
          z.rejected + z.error_rejected];
}

// One more point of each zone's chart: the counters' change since the
// last fetch, per second.  Counters that went down were started afresh
// (a reload that changed the zones): the chart starts again too.
function sample(zones, now) {
  for (const [name, z] of Object.entries(zones)) {
    const count = tally(z);
    const h = series.get(name) || {last: null, points: []};
    if (h.last && count[0] >= h.last.count[0]
        && count[1] >= h.last.count[1]) {
      const s = (now - h.last.at) / 1000;
      h.points.push([(count[0] - h.last.count[0]) / s,
                     (count[1] - h.last.count[1]) / s]);
      if (h.points.length > POINTS) h.points.shift();
    } else if (h.last) {
      h.points = [];
    }
    h.last = {at: now, count: count};
    series.set(name, h);
  }
}

function zoneBox(name) {
  const box = el("div", {class: "zone", "data-zone": name},
    el("h3", {}, name, el("span", {class: "rates"})),
    svg("svg", {class: "chart", viewBox: "0 0 300 60",
                preserveAspectRatio: "none"}),
    el("div", {class: "muted scale"}),
    el("table", {class: "top"},
      el("thead", {}, el("tr", {}, el("th", {}, "top limited subject"),
        el("th", {}, "rejected"), el("th", {}, "share"),
        el("th", {}, "requests"))),
      el("tbody")),
    el("p", {class: "note top-note"}));
  box.querySelector("svg").append(svg("polyline", {class: "admitted"}),
                                  svg("polyline", {class: "rejected"}));
  return box;
}

function drawChart(box, z, h) {
  const pts = h.points;
  const top = Math.max(1, ...pts.map(p => Math.max(p[0], p[1])));
  const step = 300 / (POINTS - 1);
  const x0 = 300 - (pts.length - 1) * step;
  for (const [i, cls] of [[0, "admitted"], [1, "rejected"]]) {
    box.querySelector("polyline." + cls).setAttribute("points",
      pts.map((p, j) => (x0 + j * step).toFixed(1) + ","
                        + (58 - p[i] / top * 56).toFixed(1)).join(" "));
  }
  const last = pts.length ? pts[pts.length - 1] : [0, 0];
  const rates = box.querySelector(".rates");
  rates.replaceChildren(
    el("span", {class: "admitted-text"}, last[0].toFixed(1) + " admitted/s"),
    ", ",
    el("span", {class: "rejected-text"}, last[1].toFixed(1) + " rejected/s"),
    el("span", {class: "muted"}, "  limit " + z.limit + " per "
                                 + z.window + " s"));
  box.querySelector(".scale").textContent = "last "
    + Math.round(pts.length * PERIOD_MS / 1000) + " s; top of the chart "
    + top.toFixed(1) + "/s";
}

function keyButton(key, hex) {
  const b = el("button", {class: "key", type: "button"}, key);
  b.addEventListener("click", () => {
    document.getElementById("subject").value = key;
    lookup("key_hex=" + hex);
  });
  return b;
}

// The zone's top limited subjects, or "no data" where the status
// location gives none (400: no top list for this zone there, 404: no
// status location).
async function drawTop(box, name) {
  const a = await ask("GET", cfg.status + "?zone=" + encodeURIComponent(name)
                             + "&top=" + TOP);
  const rows = box.querySelector("table.top tbody");
  const note = box.querySelector(".top-note");
  if (a.status !== 200 || !a.body) {
    const said = a.status === 400 || a.status === 404 ? "no data" : "error";
    rows.replaceChildren(el("tr", {}, el("td", {colspan: "4"},
      said + " (" + why(a) + ")")));
    note.textContent = "";
    return;
  }
  const t = a.body;
  rows.replaceChildren(...(t.top_rejected.length ? t.top_rejected.map(s =>
    el("tr", {}, el("td", {}, keyButton(s.key, s.key_hex)), num(s.rejected),
       num((s.share * 100).toFixed(1) + " %"), num(s.requests)))
    : [el("tr", {}, el("td", {colspan: "4"}, "none rejected"))]));
  note.textContent = "fleet-wide, " + new Date(t.from * 1000)
    .toLocaleTimeString() + " to " + new Date(t.to * 1000)
    .toLocaleTimeString() + ": " + t.requests + " requests, " + t.rejected
    + " rejected; each subject's counts within " + t.error_bound
    + " of the true ones";
}

function drawConcurrency(zones) {
  const rows = Object.entries(zones).filter(([, z]) => "in_flight" in z)
    .map(([name, z]) => el("tr", {}, el("td", {}, name), num(z.in_flight),
      num(z.queued), num(z.queue_limit), num(z.limit)));
  document.querySelector("#concurrency tbody").replaceChildren(...(rows.length
    ? rows : [el("tr", {}, el("td", {colspan: "5"}, "none"))]));
}

function drawLink(redis) {
  const up = redis.workers.filter(w => w.state === "up").length;
  const errors = Object.entries(redis.errors).map(([k, v]) => k + " " + v)
    .join(", ");
  document.getElementById("link").replaceChildren(
    el("p", {}, el("span", {class: up === redis.workers.length ? "up"
                                                               : "down"},
      up + " of " + redis.workers.length + " workers connected"),
      "; " + redis.calls + " calls, " + redis.reconnects
      + " reconnects; errors: " + errors),
    el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "worker"),
        el("th", {}, "state"), el("th", {}, "requests waiting"))),
      el("tbody", {}, ...redis.workers.map((w, i) => el("tr", {},
        num(i), el("td", {class: w.state}, w.state),
        num(w.requests_waiting))))));
}

async function refresh() {
  const problem = document.getElementById("problem");
  const a = await ask("GET", cfg.metrics + "?format=json");
  if (a.status !== 200 || !a.body) {
    problem.textContent = "metrics: " + why(a);
    return;
  }
  problem.textContent = "";
  const zones = a.body.limit_reqs;
  const rate = Object.keys(zones).filter(n => !("in_flight" in zones[n]));
  sample(zones, performance.now());
  const box = document.getElementById("zones");
  if (rate.join(" ") !== zoneNames) {
    zoneNames = rate.join(" ");
    box.replaceChildren(...rate.map(zoneBox));
  }
  for (const name of rate) {
    const b = box.querySelector("[data-zone='" + CSS.escape(name) + "']");
    drawChart(b, zones[name], series.get(name));
    await drawTop(b, name);
  }
  drawConcurrency(zones);
  drawLink(a.body.redis);
  document.getElementById("updated").textContent = "updated "
    + new Date().toLocaleTimeString();
}

async function loop() {
  try {
    await refresh();
  } catch (e) {
    document.getElementById("problem").textContent = "refresh: " + e.message;
  }
  setTimeout(loop, PERIOD_MS);
}

// DELETE or PUT on the subject `subject` ("key=..." or "key_hex=...") in
// zone `zone`, then the lookup again.
async function change(method, zone, subject, extra) {
  const a = await ask(method, cfg.status + "?zone=" + encodeURIComponent(zone)
                              + "&" + subject + extra);
  document.getElementById("answer-note").textContent = a.status === 204
    ? method + " " + zone + ": done" : method + " " + zone + ": " + why(a);
  await lookup(subject, true);
}

function actions(o, subject) {
  const td = el("td");
  if (o.type === "concurrency") return td;
  if (cfg.forgive === "on") {
    const b = el("button", {type: "button", class: "forgive"}, "Forgive");
    b.addEventListener("click", () => change("DELETE", o.zone, subject, ""));
    td.append(b, " ");
  }
  if (cfg.override === "on") {
    const what = o.type === "gcra" ? "rate" : "limit";
    const value = el("input", {size: "8", class: "override",
      placeholder: what === "rate" ? "50r/s" : "limit", "aria-label": what});
    const ttl = el("input", {size: "6", class: "ttl",
      placeholder: "ttl s", "aria-label": "ttl in seconds"});
    const set = el("button", {type: "button", class: "set"}, "Set");
    set.addEventListener("click", () => change("PUT", o.zone, subject,
      "&" + (value.value === "default" ? "limit" : what) + "="
      + encodeURIComponent(value.value)
      + (ttl.value ? "&ttl=" + encodeURIComponent(ttl.value) : "")));
    const reset = el("button", {type: "button", class: "default"},
                     "Default");
    reset.addEventListener("click", () => change("PUT", o.zone, subject,
      "&limit=default"));
    td.append(value, ttl, set, " ", reset);
  }
  return td;
}

// The status API's answer about one subject, a row per zone.
async function lookup(subject, keepNote) {
  const a = await ask("GET", cfg.status + "?" + subject);
  const out = document.getElementById("answer");
  if (!keepNote) document.getElementById("answer-note").textContent = "";
  if (a.status !== 200 || !Array.isArray(a.body)) {
    out.replaceChildren(el("p", {class: "error"}, why(a)));
    return;
  }
  const columns = [];
  for (const o of a.body) {
    for (const k of Object.keys(o)) if (!columns.includes(k)) columns.push(k);
  }
  const acts = cfg.forgive === "on" || cfg.override === "on";
  out.replaceChildren(el("table", {id: "answer-table"},
    el("thead", {}, el("tr", {}, ...columns.map(c => el("th", {}, c)),
                       ...(acts ? [el("th")] : []))),
    el("tbody", {}, ...a.body.map(o => el("tr", {"data-zone": o.zone},
      ...columns.map(c => el("td", {"data-field": c},
                             c in o ? String(o[c]) : "")),
      ...(acts ? [actions(o, subject)] : []))))));
}

document.getElementById("lookup").addEventListener("submit", ev => {
  ev.preventDefault();
  const key = document.getElementById("subject").value;
  lookup("key=" + encodeURIComponent(key)).catch(e => {
    document.getElementById("answer").textContent = "lookup: " + e.message;
  });
});

loop();
</script>
</body>
</html>
)html";

struct Slot {
    const char *mark;
    std::string_view value;
};

}  // namespace

bool dashboard_uri_ok(std::string_view uri) noexcept
{
    if (uri.empty() || uri[0] != '/') {
        return false;
    }

    for (char c : uri) {
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
                     || (c >= '0' && c <= '9');

        if (!alnum && std::string_view("-._~%/:@!$()*+,;=").find(c)
                      == std::string_view::npos)
        {
            return false;
        }
    }

    return true;
}

std::string dashboard_page(const DashboardLinks &links)
{
    const Slot slots[] = {
        {"@metrics@", links.metrics},
        {"@status@", links.status},
        {"@forgive@", links.forgive ? "on" : "off"},
        {"@override@", links.override_limit ? "on" : "off"},
    };
    std::string page(kPage, sizeof(kPage) - 1);

    for (const Slot &slot : slots) {
        std::size_t at = page.find(slot.mark);
        page.replace(at, std::strlen(slot.mark), slot.value);
    }

    return page;
}

}  // namespace ratelimit
