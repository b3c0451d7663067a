// A subject's override of its zone's limit (issue 41), as Redis told it
// when a request was decided: kept in the subject's side key
// (keys/subject_key.hpp), set and removed through the status API.
#pragma once

#include <cstdint>

#include "limits/policy.hpp"

namespace ratelimit {

struct Override {
    bool set = false;             // one was in force
    std::uint64_t limit = 0;      // requests a window, 0 to 2^53
    std::uint64_t window_ms = 0;  // the window it was given for
    std::uint64_t left_ms = 0;    // until it lapses; 0: never
};

// A change of a subject's override, as a PUT on the status API asks it
// (params/override_params.hpp): to remove it, or to set one of `limit`
// requests per `window_ms`, lapsing `ttl_ms` from now (0: never).
struct OverrideChange {
    bool remove;
    std::uint64_t limit;
    std::uint64_t window_ms;
    std::uint64_t ttl_ms;
};

// The override's limit in the window of `policy`, its zone's: a count as
// it is; a rate's requests in that window, rounded down, at most 2^53.
std::uint64_t override_in_window(const Policy &policy,
                                 const Override &override);

// The policy a zone applies to a subject under its override: a window
// zone's limit is the override's, per the zone's own window; a zone that
// takes turns (GCRA) takes its rate, the override's limit per its window.
// The policy as it is without one.
Policy overridden(const Policy &policy, const Override &override);

}  // namespace ratelimit
