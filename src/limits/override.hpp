// A subject's override of its zone's limit (issue 41), as Redis told it
// when a request was decided: kept in the subject's side key
// (keys/subject_key.hpp), set and removed through the status API.
#pragma once

#include <cstdint>

namespace ratelimit {

struct Override {
    bool set = false;             // one was in force
    std::uint64_t limit = 0;      // requests a window, 0 to 2^53
    std::uint64_t window_ms = 0;  // the window it was given for
    std::uint64_t left_ms = 0;    // until it lapses; 0: never
};

}  // namespace ratelimit
