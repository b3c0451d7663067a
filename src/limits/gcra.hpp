// GCRA zones (algorithm=gcra): nginx's limit_req for a fleet.  The script
// keeps each subject's theoretical arrival time (TAT) and answers, per
// zone, `ahead`: how far the TAT lies past Redis's now, in microseconds,
// after the request if it was counted, else before it.  A request of the
// rate takes one emission interval T = window / limit of it; a zone lets
// 1 + burst of them ahead at once (its capacity).  Here is what nginx
// makes of `ahead`: the request's wait, and the header numbers, as the
// functions of GCRA's row (algorithms.hpp).
#pragma once

#include <cstdint>

#include "limits/policy.hpp"

namespace ratelimit {

// `delay=` of a location that has `nodelay`: no request waits.
constexpr std::uint64_t kNoDelay = ~std::uint64_t{0};

// The milliseconds a request of `cost` units that a GCRA zone admitted
// waits for its turn, as limit_req's: none for the first `delay` requests
// over the rate (kNoDelay: none at all), then ahead - (delay + cost) * T.
std::uint64_t gcra_wait_ms(const Policy &policy, std::uint64_t ahead_us,
                           std::uint64_t cost, std::uint64_t delay);

// The capacity, 1 + burst requests at once: the quota of the headers, and
// the script's third zone argument.
std::uint64_t gcra_capacity(const Policy &policy);

// Its limit is the capacity; remaining, the requests of it still to come
// at once; reset, until the backlog is gone, or of a request that did not
// fit (`over`), until one would.  A TAT has no buckets: `oldest` and
// `now_ms` are not read.
ZoneStatus gcra_status(const Policy &policy, std::uint64_t ahead_us,
                       std::uint64_t oldest, bool over, std::uint64_t now_ms);

// The turns a backlog of `ahead_us` holds, rounded up: what the status
// API calls used.
std::uint64_t gcra_turns_ahead(const Policy &policy, std::uint64_t ahead_us);

// The seconds a full burst, 1 + burst requests, takes at the rate: the
// window of RateLimit-Policy, whose quota is the capacity; at least 1, at
// any time.
std::uint64_t gcra_window_s(const Policy &policy, std::uint64_t now_ms);

}  // namespace ratelimit
