// The JSON of the status API's `?zone=NAME&top=N` (issue 45):
//   {"zone":"api","window":60,"from":1700000000,"to":1700000060,
//    "requests":12345,"rejected":678,"error_bound":12,
//    "top_rejected":[{"key":"k1","key_hex":"6b31","requests":500,
//                     "rejected":300,"share":0.442}],
//    "top_requests":[...]}
// `key` as write_json_string() makes it, `key_hex` its bytes; `share` its
// rejected over the zone's, 3 decimals (0 when the zone rejected none);
// `error_bound` the larger of the two rankings' summed errors: every
// subject's requests and rejected are within it of the truth.  Subjects
// with no rejection are left out of top_rejected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "top/top_script.hpp"

namespace ratelimit {

struct TopReport {
    std::string_view zone;
    std::uint64_t from, to;  // Unix seconds
    const TopAnswer *answer;
};

std::size_t top_json_max_size(const TopReport &report);
std::size_t write_top_json(const TopReport &report, char *out);

}  // namespace ratelimit
