// The JSON the status API (`ratelimit_query`) and the peek header answer
// with: an array of one object per zone,
//   {"zone":"api","key":"...","limit":10,"used":7,"remaining":3,
//    "window":60,"reset":1700000000,"retry_after":0}
// and {"error":"..."} for a request that cannot be answered.  A query with
// ?interval= adds, after retry_after, the interval asked, the span summed
// for it (whole buckets) and the count in that span, in seconds with
// milliseconds:
//   "interval":20.000,"interval_summed":20.000,"count_in_interval":4
// and the note of the zone's algorithm (AlgorithmRow::interval_note), as a
// fixed window's, whose count is only known for the whole current window:
//   "interval_note":"fixed window: the count of its current window"
// A GCRA zone's object says so: its limit is its capacity (1 + burst
// requests at once), `used` the turns its backlog holds, and `next_in` when
// a request would be admitted, in seconds with milliseconds (0.000: now);
// an algorithm's row says which fields its zones report:
//   {"zone":"api","key":"...","type":"gcra","limit":6,"used":6,
//    "remaining":0,"window":1,"reset":1700000001,"retry_after":1,
//    "next_in":0.080}
// A calendar zone's object says so, and names the period it counts in,
// its start and end in ISO 8601 in the zone's time zone:
//   {"zone":"plan","key":"...","type":"calendar","limit":1000000,
//    "used":7,"remaining":999993,"window":2592000,"reset":1796079600,
//    "retry_after":0,"period_start":"2026-11-01T00:00:00+01:00",
//    "period_end":"2026-12-01T00:00:00+01:00"}
// A concurrency zone's object says so, and counts requests in flight
// instead (across the fleet, as Redis holds them), and takes no interval:
//   {"zone":"uploads","key":"...","type":"concurrency","limit":2,
//    "in_flight":2,"queued":5,"queue_limit":20}
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "scripts/concurrency_script.hpp"
#include "limits/policy.hpp"
#include "scripts/window_script.hpp"

namespace ratelimit {

struct ZoneReport {
    std::string_view zone;
    std::string_view subject;  // any bytes
    std::uint64_t limit;
    std::uint64_t used;         // counted in the window now
    std::uint64_t remaining;
    std::uint64_t window_s;
    std::uint64_t reset;        // Unix time at which remaining grows
    std::uint64_t retry_after;  // seconds until a request fits; 0 if now
    std::uint64_t interval_ms = 0;  // ?interval= asked; 0: not asked
    std::uint64_t summed_ms = 0;    // the whole buckets summed for it
    std::uint64_t in_interval = 0;  // requests counted in those buckets
    std::string_view interval_note = {};  // "" for none
    std::string_view type = {};           // "" for none: see above
    bool takes_turns = false;        // next_ms is reported
    std::uint64_t next_ms = 0;       // until a request would be admitted
    // A calendar zone's period: its start and end as ISO 8601 local time,
    // which need no escape ("" for other zones).
    std::string_view period_start = {};
    std::string_view period_end = {};
    // The subject's override in force (limits/override.hpp), reported as
    // its limit, the seconds until it lapses (rounded up; -1: never) and,
    // of a zone that takes turns, its rate.
    Override override = {};
    // The subject's ban in the zone (issue 43): ms until it ends, 0 for
    // none; reported as "banned_for", seconds rounded up.
    std::uint64_t banned_ms = 0;
    // A concurrency zone's report has `limit` (its concurrency=) and these
    // instead of the window's fields.
    bool concurrency = false;
    std::uint64_t in_flight = 0;    // slots held
    std::uint64_t queued = 0;       // waiters in its queue
    std::uint64_t queue_limit = 0;  // its queue=
};

ZoneReport report_zone(std::string_view zone, std::string_view subject,
                       const Policy &policy, const ZoneCount &count,
                       std::uint64_t now_ms);

// A concurrency zone's: `in_flight` and `queued` as Redis counts them.
ZoneReport report_permit_zone(std::string_view zone, std::string_view subject,
                              const ConcurrencyPolicy &policy,
                              std::uint64_t in_flight, std::uint64_t queued);

// Adds the answer to ?interval=: `interval_ms` (1 to the policy's window)
// rounded up to whole buckets, and the count of an interval peek; nothing
// if the policy's algorithm answers none.
void report_interval(ZoneReport *report, const Policy &policy,
                     std::uint64_t interval_ms, const ZoneCount &count);

std::size_t status_json_max_size(const ZoneReport *reports, std::size_t n);
std::size_t write_status_json(const ZoneReport *reports, std::size_t n,
                              char *out);

// A JSON string's content for arbitrary bytes: valid UTF-8 is kept, '"',
// '\' and control characters are escaped, and a byte that is not part of
// valid UTF-8 becomes \u00XX (its Latin-1 reading), so the output is always
// valid JSON.  At most 6 output bytes per input byte.
std::size_t write_json_string(std::string_view bytes, char *out);

}  // namespace ratelimit
