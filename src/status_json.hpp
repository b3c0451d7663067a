// The JSON the status API (`ratelimit_query`) and the peek header answer
// with: an array of one object per zone,
//   {"zone":"api","key":"...","limit":10,"used":7,"remaining":3,
//    "window":60,"reset":1700000000,"retry_after":0}
// and {"error":"..."} for a request that cannot be answered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "policy.hpp"
#include "window_script.hpp"

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
};

ZoneReport report_zone(std::string_view zone, std::string_view subject,
                       const Policy &policy, const ZoneCount &count,
                       std::uint64_t now_ms);

std::size_t status_json_max_size(const ZoneReport *reports, std::size_t n);
std::size_t write_status_json(const ZoneReport *reports, std::size_t n,
                              char *out);

// A JSON string's content for arbitrary bytes: valid UTF-8 is kept, '"',
// '\' and control characters are escaped, and a byte that is not part of
// valid UTF-8 becomes \u00XX (its Latin-1 reading), so the output is always
// valid JSON.  At most 6 output bytes per input byte.
std::size_t write_json_string(std::string_view bytes, char *out);

}  // namespace ratelimit
