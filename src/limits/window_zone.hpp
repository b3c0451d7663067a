// Sliding and fixed window zones (algorithm=sliding, the default, and
// algorithm=fixed): the script counts units in the buckets of a window (a
// fixed window's one bucket is the window) and answers, per zone, the
// count and its oldest bucket.  Here is what nginx makes of them, as the
// functions of both windows' rows (algorithms.hpp).
#pragma once

#include <cstdint>

#include "limits/policy.hpp"

namespace ratelimit {

// The limit: the requests of a window.
std::uint64_t window_quota(const Policy &policy);

// The window in whole seconds, rounded up, at any time.
std::uint64_t window_length_s(const Policy &policy, std::uint64_t now_ms);

// The buckets of a window.
std::uint64_t window_buckets(const Policy &policy);

// Remaining: what the limit leaves of `total`, none if `over`; reset: until
// the counts of the `oldest` bucket (0: none) leave the window.
ZoneStatus window_status(const Policy &policy, std::uint64_t total,
                         std::uint64_t oldest, bool over,
                         std::uint64_t now_ms);

// Used: the count, `total`.
std::uint64_t window_used(const Policy &policy, std::uint64_t total);

// No request waits: a window admits or rejects at once.
std::uint64_t window_wait_ms(const Policy &policy, std::uint64_t total,
                             std::uint64_t cost, std::uint64_t delay);

}  // namespace ratelimit
