#include "report/metrics_text.hpp"

#include <algorithm>
#include <cstdio>

namespace ratelimit {

namespace {

constexpr std::size_t kDecisions = static_cast<std::size_t>(Decision::kCount);
constexpr std::size_t kLinkErrors = static_cast<std::size_t>(LinkError::kCount);
constexpr std::size_t kLinkStates = static_cast<std::size_t>(LinkState::kCount);

std::string decimal_text(std::uint64_t n)
{
    return std::to_string(n);
}

// An integer count of 10^-digits units as an exact decimal: (1500, 3) is
// "1.500", (7, 0) is "7".
std::string fixed_point(std::uint64_t units, unsigned digits)
{
    if (digits == 0) {
        return decimal_text(units);
    }

    std::uint64_t scale = 1;

    for (unsigned i = 0; i < digits; i++) {
        scale *= 10;
    }

    std::string fraction = decimal_text(units % scale);
    return decimal_text(units / scale) + "."
           + std::string(digits - fraction.size(), '0') + fraction;
}

std::string decimal(double value, int digits)
{
    char text[64];
    std::snprintf(text, sizeof(text), "%.*f", digits, value);
    return text;
}

// Prometheus's text format and OpenMetrics differ, for what is written
// here, in a counter's TYPE line (OpenMetrics names the family without
// _total) and in OpenMetrics's closing # EOF.
class Exposition {
public:
    Exposition(std::string *out, bool open_metrics)
        : out_(*out), open_metrics_(open_metrics) {}

    void family(std::string_view name, std::string_view type,
                std::string_view help)
    {
        std::string full = "nginx_ratelimit_" + std::string(name);

        if (type == "counter" && !open_metrics_) {
            full += "_total";
        }

        out_ += "# HELP " + full + " " + std::string(help) + "\n";
        out_ += "# TYPE " + full + " " + std::string(type) + "\n";
    }

    // `labels` is the text inside the braces, without them; may be empty.
    void sample(std::string_view name, std::string_view labels,
                std::string_view value)
    {
        out_ += "nginx_ratelimit_";
        out_ += name;

        if (!labels.empty()) {
            out_ += "{" + std::string(labels) + "}";
        }

        out_ += " " + std::string(value) + "\n";
    }

    template <std::size_t kBounds>
    void histogram(std::string_view name, std::string_view labels,
                   const Histogram<kBounds> &h,
                   const std::string_view (&bounds)[kBounds],
                   unsigned sum_digits)
    {
        std::string sep = labels.empty() ? "" : std::string(labels) + ",";
        std::string n(name);
        std::uint64_t cumulative = 0;

        for (std::size_t i = 0; i <= kBounds; i++) {
            cumulative += h.buckets[i];
            std::string le = i < kBounds ? std::string(bounds[i]) : "+Inf";
            sample(n + "_bucket", sep + "le=\"" + le + "\"",
                   decimal_text(cumulative));
        }

        sample(n + "_count", labels, decimal_text(cumulative));
        sample(n + "_sum", labels, fixed_point(h.sum, sum_digits));
    }

    void end()
    {
        if (open_metrics_) {
            out_ += "# EOF\n";
        }
    }

private:
    std::string &out_;
    bool open_metrics_;
};

std::string zone_label(const ZoneMetrics &z)
{
    return "zone=\"" + std::string(z.name) + "\"";
}

void write_decisions(Exposition &e, const MetricsReport &r)
{
    e.family("decisions", "counter",
             "Requests each zone decided, by decision.");

    for (std::size_t i = 0; i < r.zone_count; i++) {
        for (std::size_t d = 0; d < kDecisions; d++) {
            e.sample("decisions_total",
                     zone_label(r.zones[i]) + ",decision=\""
                         + std::string(decision_name(Decision(d))) + "\"",
                     decimal_text(r.zones[i].sum.decisions[d]));
        }
    }
}

// A per-zone family of one sample per zone, its value from `value`.
template <typename Value>
void per_zone(Exposition &e, const MetricsReport &r, std::string_view name,
              std::string_view type, std::string_view help, Value value)
{
    e.family(name, type, help);
    std::string sample(name);

    if (type == "counter") {
        sample += "_total";
    }

    for (std::size_t i = 0; i < r.zone_count; i++) {
        e.sample(sample, zone_label(r.zones[i]), value(r.zones[i]));
    }
}

// A counter family of the rate zones, one sample per zone and kind: the
// zone's counters `values`, each labelled `label` with its name_of(k).
template <std::size_t kKinds, typename Kind>
void per_rate_zone(Exposition &e, const MetricsReport &r,
                   std::string_view name, std::string_view help,
                   std::string_view label,
                   const std::uint64_t (ZoneCounters::*values)[kKinds],
                   std::string_view (*name_of)(Kind))
{
    e.family(name, "counter", help);

    for (std::size_t i = 0; i < r.zone_count; i++) {
        for (std::size_t k = 0; !r.zones[i].concurrency && k < kKinds; k++) {
            e.sample(std::string(name) + "_total",
                     zone_label(r.zones[i]) + "," + std::string(label)
                         + "=\"" + std::string(name_of(Kind(k))) + "\"",
                     decimal_text((r.zones[i].sum.*values)[k]));
        }
    }
}

// A counter of the rate zones, one sample per zone.
void rate_zone_counter(Exposition &e, const MetricsReport &r,
                       std::string_view name, std::string_view help,
                       std::uint64_t ZoneCounters::*value)
{
    e.family(name, "counter", help);

    for (std::size_t i = 0; i < r.zone_count; i++) {
        if (!r.zones[i].concurrency) {
            e.sample(std::string(name) + "_total", zone_label(r.zones[i]),
                     decimal_text(r.zones[i].sum.*value));
        }
    }
}

// Zones that take turns only (GCRA's): the others delay no request.
void write_delays(Exposition &e, const MetricsReport &r)
{
    e.family("delayed", "counter",
             "Requests a GCRA zone admitted that waited for their turn.");

    for (std::size_t i = 0; i < r.zone_count; i++) {
        if (r.zones[i].takes_turns) {
            e.sample("delayed_total", zone_label(r.zones[i]),
                     decimal_text(r.zones[i].sum.delayed));
        }
    }

    e.family("delay_seconds", "histogram",
             "The waits of the requests a GCRA zone delayed.");

    for (std::size_t i = 0; i < r.zone_count; i++) {
        if (r.zones[i].takes_turns) {
            e.histogram("delay_seconds", zone_label(r.zones[i]),
                        r.zones[i].sum.delay_us, kQueueWaitBoundsText, 6);
        }
    }
}

void write_units(Exposition &e, const MetricsReport &r)
{
    per_rate_zone(e, r, "units",
                  "Units of rate zones: reserved by admitted requests, "
                  "asked by rejected ones, added and given back by settles.",
                  "event", &ZoneCounters::units, unit_event_name);
    per_rate_zone(e, r, "settles",
                  "Settles of rate zones, by what became of them.",
                  "outcome", &ZoneCounters::settles, settle_outcome_name);
    per_rate_zone(e, r, "override_changes",
                  "Subjects' overrides set or removed through this server's "
                  "status API.",
                  "change", &ZoneCounters::override_changes,
                  override_change_name);
    rate_zone_counter(e, r, "bans",
                      "Subjects banned (ban=) by requests of this server.",
                      &ZoneCounters::bans);
    rate_zone_counter(e, r, "banned_requests",
                      "Requests refused by a ban in force.",
                      &ZoneCounters::banned_requests);
    per_rate_zone(e, r, "local_decisions",
                  "Requests of rate zones decided in this server's memory "
                  "while Redis could not be reached (ratelimit_fail local).",
                  "decision", &ZoneCounters::local, local_decision_name);
}

void write_zones(Exposition &e, const MetricsReport &r)
{
    write_decisions(e, r);
    write_units(e, r);
    write_delays(e, r);
    per_zone(e, r, "deny_cache_hits", "counter",
             "Rejections answered from the worker's memory of rejections.",
             [](const ZoneMetrics &z) {
                 return decimal_text(z.sum.deny_cache_hits);
             });
    per_zone(e, r, "zone_limit", "gauge",
             "Requests a window admits; from a variable, the last applied.",
             [](const ZoneMetrics &z) { return decimal_text(z.limit); });
    per_zone(e, r, "zone_window_seconds", "gauge", "The window's length.",
             [](const ZoneMetrics &z) { return fixed_point(z.window_ms, 3); });
    per_zone(e, r, "successful_responses", "counter",
             "Requests the zone let through that were answered below 400.",
             [](const ZoneMetrics &z) {
                 return decimal_text(z.sum.successes);
             });
    per_zone(e, r, "response_time_seconds", "counter",
             "Response times of the successful responses, summed.",
             [](const ZoneMetrics &z) {
                 return fixed_point(z.sum.response_us, 6);
             });
    per_zone(e, r, "busy_seconds", "counter",
             "Time in which a request the zone let through was in flight.",
             [](const ZoneMetrics &z) {
                 return fixed_point(z.sum.busy_us, 6);
             });

    e.family("check_duration_seconds", "histogram",
             "Time a request waited for its verdict.");

    for (std::size_t i = 0; i < r.zone_count; i++) {
        e.histogram("check_duration_seconds", zone_label(r.zones[i]),
                    r.zones[i].sum.check_us, kDurationBoundsText, 6);
    }
}

std::uint64_t in_flight(const ZoneCounters &c)
{
    return c.permits_taken - c.permits_freed;
}

std::uint64_t queued(const ZoneCounters &c)
{
    return c.queue_entered - c.queue_left;
}

// Concurrency zones only: the rate zones have none of these.
void write_concurrency(Exposition &e, const MetricsReport &r)
{
    static constexpr std::size_t kEvents =
        static_cast<std::size_t>(PermitEvent::kCount);
    struct Gauge {
        std::string_view name, help;
        std::uint64_t (*value)(const ZoneMetrics &z);
    };
    static const Gauge gauges[] = {
        {"concurrency_in_flight", "Requests holding a slot in this server.",
         [](const ZoneMetrics &z) { return in_flight(z.sum); }},
        {"concurrency_queued", "Requests of this server waiting for one.",
         [](const ZoneMetrics &z) { return queued(z.sum); }},
        {"concurrency_queue_limit", "Requests a subject's queue holds.",
         [](const ZoneMetrics &z) { return z.queue_limit; }},
    };

    for (const Gauge &g : gauges) {
        e.family(g.name, "gauge", g.help);
        for (std::size_t i = 0; i < r.zone_count; i++) {
            if (r.zones[i].concurrency) {
                e.sample(g.name, zone_label(r.zones[i]),
                         decimal_text(g.value(r.zones[i])));
            }
        }
    }

    e.family("concurrency_events", "counter",
             "What concurrency zones did with requests, by event.");

    for (std::size_t i = 0; i < r.zone_count; i++) {
        for (std::size_t k = 0; r.zones[i].concurrency && k < kEvents; k++) {
            e.sample("concurrency_events_total",
                     zone_label(r.zones[i]) + ",event=\""
                         + std::string(permit_event_name(PermitEvent(k)))
                         + "\"",
                     decimal_text(r.zones[i].sum.permit_events[k]));
        }
    }

    e.family("concurrency_queue_wait_seconds", "histogram",
             "Time a request admitted after waiting spent in the queue.");

    for (std::size_t i = 0; i < r.zone_count; i++) {
        if (r.zones[i].concurrency) {
            e.histogram("concurrency_queue_wait_seconds",
                        zone_label(r.zones[i]), r.zones[i].sum.queue_wait_us,
                        kQueueWaitBoundsText, 6);
        }
    }
}

void write_link_gauges(Exposition &e, const MetricsReport &r)
{
    e.family("redis_connection_state", "gauge",
             "1 for the state each worker's Redis connection is in.");

    for (std::size_t w = 0; w < r.worker_count; w++) {
        for (std::size_t s = 0; s < kLinkStates; s++) {
            bool now = static_cast<std::size_t>(r.workers[w].state) == s;
            e.sample("redis_connection_state",
                     "worker=\"" + decimal_text(w) + "\",state=\""
                         + std::string(link_state_name(LinkState(s))) + "\"",
                     now ? "1" : "0");
        }
    }

    e.family("redis_requests_waiting", "gauge",
             "Requests each worker has waiting for Redis's reply.");

    for (std::size_t w = 0; w < r.worker_count; w++) {
        e.sample("redis_requests_waiting", "worker=\"" + decimal_text(w) + "\"",
                 decimal_text(r.workers[w].waiting));
    }
}

void write_link(Exposition &e, const MetricsReport &r)
{
    const LinkCounters &l = r.link;

    e.family("redis_calls", "counter", "Script calls sent to Redis.");
    e.sample("redis_calls_total", "", decimal_text(l.calls));
    e.family("redis_requests_per_call", "histogram",
             "Requests decided by one script call.");
    e.histogram("redis_requests_per_call", "", l.requests_per_call,
                kBatchBoundsText, 0);
    e.family("redis_call_duration_seconds", "histogram",
             "Round trip of a script call, from sending to its reply.");
    e.histogram("redis_call_duration_seconds", "", l.round_trip_us,
                kDurationBoundsText, 6);
    e.family("redis_errors", "counter", "Failures talking to Redis, by kind.");

    for (std::size_t k = 0; k < kLinkErrors; k++) {
        e.sample("redis_errors_total",
                 "kind=\"" + std::string(link_error_name(LinkError(k))) + "\"",
                 decimal_text(l.errors[k]));
    }

    e.family("redis_reconnects", "counter",
             "Connection attempts after the first, made by the backoff.");
    e.sample("redis_reconnects_total", "", decimal_text(l.reconnects));
    e.family("local_seconds", "counter",
             "Time workers decided locally, Redis unreachable, summed.");
    e.sample("local_seconds_total", "", fixed_point(l.local_us, 6));
    write_link_gauges(e, r);
}

std::string prometheus(const MetricsReport &r, bool open_metrics)
{
    std::string out;
    Exposition e(&out, open_metrics);

    write_zones(e, r);
    write_concurrency(e, r);
    write_link(e, r);
    e.family("build_info", "gauge", "1, labelled with the versions.");
    e.sample("build_info",
             "version=\"" + std::string(kModuleVersion) + "\",nginx=\""
                 + std::string(r.server_version) + "\"",
             "1");
    e.end();
    return out;
}

template <std::size_t kBounds>
std::string json_histogram(const Histogram<kBounds> &h,
                           const std::string_view (&bounds)[kBounds],
                           unsigned sum_digits)
{
    std::string buckets;
    std::uint64_t cumulative = 0;

    for (std::size_t i = 0; i <= kBounds; i++) {
        cumulative += h.buckets[i];
        buckets += (i > 0 ? ",\"" : "\"")
                   + std::string(i < kBounds ? bounds[i] : "+Inf") + "\":"
                   + decimal_text(cumulative);
    }

    return "{\"count\":" + decimal_text(cumulative) + ",\"sum\":"
           + fixed_point(h.sum, sum_digits) + ",\"buckets\":{" + buckets
           + "}}";
}

// A concurrency zone's own members, after those every zone has.
std::string json_concurrency(const ZoneMetrics &z)
{
    const ZoneCounters &c = z.sum;
    std::string out = ",\"in_flight\":" + decimal_text(in_flight(c))
                      + ",\"queued\":" + decimal_text(queued(c))
                      + ",\"queue_limit\":" + decimal_text(z.queue_limit);

    for (std::size_t k = 0; k < static_cast<std::size_t>(PermitEvent::kCount);
         k++)
    {
        out += ",\"" + std::string(permit_event_name(PermitEvent(k))) + "\":"
               + decimal_text(c.permit_events[k]);
    }

    return out + ",\"queue_wait\":"
           + json_histogram(c.queue_wait_us, kQueueWaitBoundsText, 6);
}

// `counters`, kKinds of them, as a JSON object of name_of(k): value.
template <std::size_t kKinds, typename Kind>
std::string json_counters(const std::uint64_t (&counters)[kKinds],
                          std::string_view (*name_of)(Kind))
{
    std::string out = "{";

    for (std::size_t k = 0; k < kKinds; k++) {
        out += (k > 0 ? ",\"" : "\"") + std::string(name_of(Kind(k)))
               + "\":" + decimal_text(counters[k]);
    }

    return out + "}";
}

// A rate zone's own members, after those every zone has.
std::string json_units(const ZoneMetrics &z)
{
    std::string delays = z.takes_turns
        ? ",\"delayed\":" + decimal_text(z.sum.delayed) + ",\"delay\":"
              + json_histogram(z.sum.delay_us, kQueueWaitBoundsText, 6)
        : std::string();

    return ",\"units\":" + json_counters(z.sum.units, unit_event_name)
           + ",\"settles\":"
           + json_counters(z.sum.settles, settle_outcome_name)
           + ",\"override_changes\":"
           + json_counters(z.sum.override_changes, override_change_name)
           + ",\"local\":" + json_counters(z.sum.local, local_decision_name)
           + ",\"bans\":" + decimal_text(z.sum.bans)
           + ",\"banned_requests\":" + decimal_text(z.sum.banned_requests)
           + delays;
}

std::string json_zone(const ZoneMetrics &z)
{
    const ZoneCounters &c = z.sum;
    std::string out = "\"" + std::string(z.name) + "\":{";

    for (std::size_t d = 0; d < kDecisions; d++) {
        out += "\"" + std::string(decision_name(Decision(d))) + "\":"
               + decimal_text(c.decisions[d]) + ",";
    }

    double rate = c.busy_us > 0 ? c.successes * 1e6 / c.busy_us : 0;
    double mean = c.successes > 0 ? c.response_us / 1e6 / c.successes : 0;

    std::string calendar = z.period.empty()
        ? std::string()
        : ",\"type\":\"" + std::string(z.type) + "\",\"period\":\""
              + std::string(z.period) + "\",\"tz\":\"" + std::string(z.tz)
              + "\"";

    return out + "\"deny_cache_hits\":" + decimal_text(c.deny_cache_hits)
           + ",\"limit\":" + decimal_text(z.limit)
           + ",\"window\":" + fixed_point(z.window_ms, 3) + calendar
           + ",\"check_duration\":"
           + json_histogram(c.check_us, kDurationBoundsText, 6)
           + ",\"successful_responses\":" + decimal_text(c.successes)
           + ",\"busy_seconds\":" + fixed_point(c.busy_us, 6)
           + ",\"requests_per_second\":" + decimal(rate, 3)
           + ",\"mean_response_time\":" + decimal(mean, 6)
           + (z.concurrency ? json_concurrency(z) : json_units(z)) + "}";
}

std::string json_link(const MetricsReport &r)
{
    const LinkCounters &l = r.link;
    std::string errors, workers;

    for (std::size_t k = 0; k < kLinkErrors; k++) {
        errors += (k > 0 ? ",\"" : "\"")
                  + std::string(link_error_name(LinkError(k))) + "\":"
                  + decimal_text(l.errors[k]);
    }

    for (std::size_t w = 0; w < r.worker_count; w++) {
        workers += (w > 0 ? ",{\"state\":\"" : "{\"state\":\"")
                   + std::string(link_state_name(r.workers[w].state))
                   + "\",\"requests_waiting\":"
                   + decimal_text(r.workers[w].waiting) + "}";
    }

    return "{\"calls\":" + decimal_text(l.calls) + ",\"requests_per_call\":"
           + json_histogram(l.requests_per_call, kBatchBoundsText, 0)
           + ",\"call_duration\":"
           + json_histogram(l.round_trip_us, kDurationBoundsText, 6)
           + ",\"errors\":{" + errors + "},\"reconnects\":"
           + decimal_text(l.reconnects) + ",\"local_seconds\":"
           + fixed_point(l.local_us, 6) + ",\"workers\":[" + workers + "]}";
}

std::string json(const MetricsReport &r)
{
    std::string zones;

    for (std::size_t i = 0; i < r.zone_count; i++) {
        zones += (i > 0 ? "," : "") + json_zone(r.zones[i]);
    }

    return "{\"build\":{\"version\":\"" + std::string(kModuleVersion)
           + "\",\"nginx\":\"" + std::string(r.server_version)
           + "\"},\"limit_reqs\":{" + zones + "},\"redis\":" + json_link(r)
           + "}\n";
}

// A media range's quality in thousandths: its `q=` parameter (RFC 9110,
// at most three decimals), 1000 without one, 0 when it does not parse.
int range_quality(std::string_view range)
{
    for (std::size_t at = range.find(';'); at != range.npos;
         at = range.find(';', at + 1))
    {
        std::string_view param = range.substr(at + 1);
        param.remove_prefix(std::min(param.find_first_not_of(" \t"),
                                     param.size()));

        if (param.size() < 2 || (param[0] != 'q' && param[0] != 'Q')
            || param[1] != '=')
        {
            continue;
        }

        param.remove_prefix(2);
        int q = 0, scale = 1000;
        bool point = false;

        for (char c : param.substr(0, param.find_first_of("; \t"))) {
            if (c == '.' && !point) {
                point = true;
            } else if (c < '0' || c > '9' || (point && scale == 1)) {
                return 0;
            } else if (point) {
                scale /= 10;
                q += (c - '0') * scale;
            } else {
                q = q * 10 + (c - '0') * 1000;
            }
        }

        return std::min(q, 1000);
    }

    return 1000;
}

// The highest quality the Accept header gives a range that `matches`.
template <typename Matches>
int best_quality(std::string_view accept, Matches matches)
{
    int best = 0;

    while (!accept.empty()) {
        std::size_t comma = accept.find(',');
        std::string_view range = accept.substr(0, comma);
        std::string_view type = range.substr(0, range.find(';'));

        type.remove_prefix(std::min(type.find_first_not_of(" \t"),
                                    type.size()));
        type = type.substr(0, type.find_first_of(" \t"));

        if (matches(type)) {
            best = std::max(best, range_quality(range));
        }

        accept.remove_prefix(comma == accept.npos ? accept.size()
                                                  : comma + 1);
    }

    return best;
}

}  // namespace

MetricsFormat choose_metrics_format(std::string_view format_arg,
                                    std::string_view accept)
{
    if (format_arg == "json") {
        return MetricsFormat::kJson;
    }

    if (format_arg == "openmetrics") {
        return MetricsFormat::kOpenMetrics;
    }

    if (format_arg == "prometheus") {
        return MetricsFormat::kPrometheus;
    }

    int open = best_quality(accept, [](std::string_view type) {
        return type == "application/openmetrics-text";
    });
    int plain = best_quality(accept, [](std::string_view type) {
        return type == "text/plain" || type == "text/*" || type == "*/*";
    });

    return open > 0 && open >= plain ? MetricsFormat::kOpenMetrics
                                     : MetricsFormat::kPrometheus;
}

std::string_view metrics_content_type(MetricsFormat format)
{
    switch (format) {
    case MetricsFormat::kJson:
        return "application/json";
    case MetricsFormat::kOpenMetrics:
        return "application/openmetrics-text; version=1.0.0; charset=utf-8";
    default:
        return "text/plain; version=0.0.4; charset=utf-8";
    }
}

std::string render_metrics(const MetricsReport &report, MetricsFormat format)
{
    switch (format) {
    case MetricsFormat::kJson:
        return json(report);
    case MetricsFormat::kOpenMetrics:
        return prometheus(report, true);
    default:
        return prometheus(report, false);
    }
}

}  // namespace ratelimit
