// A server's own share of a limit, counted in its memory alone while Redis
// cannot be reached (`ratelimit_fail local`): each of N live servers admits
// ceil(limit / N) per window, in fixed windows aligned on the zone's window
// (window k covers [k * window_ms, (k + 1) * window_ms) of wall-clock time,
// in ms since the epoch), whatever the zone's algorithm.
#pragma once

#include <cstdint>

namespace ratelimit {

// ceil(limit / servers); servers 0 is taken as 1.
std::uint64_t local_share(std::uint64_t limit, std::uint64_t servers);

// One subject's units in one zone on this server, in window `window`.
struct LocalCount {
    std::uint64_t window;
    std::uint64_t used;
};

// A request of `cost` units against the share, at now_ms: whether it fits,
// the units the window admits after it (after its cost if it fits), and
// the ms until the window ends.  A count of an earlier window is 0.
struct LocalStatus {
    bool fits;
    std::uint64_t remaining;
    std::uint64_t reset_ms;
};

LocalStatus local_status(const LocalCount &count, std::uint64_t share,
                         std::uint64_t window_ms, std::uint64_t now_ms,
                         std::uint64_t cost);

// Counts `cost` units in the window of now_ms.
void local_add(LocalCount *count, std::uint64_t window_ms,
               std::uint64_t now_ms, std::uint64_t cost);

}  // namespace ratelimit
