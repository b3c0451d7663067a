// The metrics scrape's body: Prometheus text (0.0.4), OpenMetrics 1.0 or
// JSON, made from the counters summed over every worker.  Every name starts
// with nginx_ratelimit_; times are in seconds, counters end in _total.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "report/metrics_model.hpp"

namespace ratelimit {

// The module's version, as build_info reports it.
constexpr std::string_view kModuleVersion = "0.1.0";

struct ZoneMetrics {
    std::string_view name;
    std::uint64_t limit;      // requests per window (a limit from a
                              // variable: the one applied last), or in
                              // flight
    std::uint64_t window_ms;  // 0 for a concurrency zone; a calendar
                              // zone's: its period now
    // A calendar zone's algorithm, period ("month") and time zone
    // ("Europe/Berlin"), in its JSON object; "" for other zones.
    std::string_view type;
    std::string_view period;
    std::string_view tz;
    bool concurrency;
    bool takes_turns;           // its algorithm's: its requests may
                                // wait for their turn (delays reported)
    std::uint64_t queue_limit;  // a concurrency zone's
    ZoneCounters sum;  // busy_us includes the interval still open
};

// One worker slot's own gauges.
struct WorkerLink {
    LinkState state;
    std::uint64_t waiting;
};

struct MetricsReport {
    const ZoneMetrics *zones;
    std::size_t zone_count;
    LinkCounters link;  // summed; its state and waiting are unused
    const WorkerLink *workers;
    std::size_t worker_count;
    std::string_view server_version;  // nginx's
};

enum class MetricsFormat { kPrometheus, kOpenMetrics, kJson };

// `?format=` wins (json, prometheus, openmetrics); else OpenMetrics if the
// Accept header names it, as Prometheus's scraper does, with a quality
// above 0 and no lower than text/plain's; else Prometheus.
MetricsFormat choose_metrics_format(std::string_view format_arg,
                                    std::string_view accept);

std::string_view metrics_content_type(MetricsFormat format);

// Throws std::bad_alloc only.
std::string render_metrics(const MetricsReport &report, MetricsFormat format);

}  // namespace ratelimit
