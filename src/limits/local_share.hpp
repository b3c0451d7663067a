// A server's own share of a limit, counted in its memory alone while Redis
// cannot be reached (`ratelimit_fail local`): each of N live servers admits
// ceil(limit / N) per window, in fixed windows aligned on the zone's window
// (window k covers [k * window_ms, (k + 1) * window_ms) of wall-clock time,
// in ms since the epoch), whatever the zone's algorithm; a calendar zone's
// windows are its periods.  A window is named by its end.
#pragma once

#include <cstdint>

namespace ratelimit {

// ceil(limit / servers); servers 0 is taken as 1.
std::uint64_t local_share(std::uint64_t limit, std::uint64_t servers);

// One subject's units in one zone on this server, in the window that ends
// at `window_end_ms`.
struct LocalCount {
    std::uint64_t window_end_ms;
    std::uint64_t used;
    std::uint64_t full_until_ms;  // the end of the window in which the
                                  // share was used up; 0: not yet
    // The subject's override of the zone's limit (limits/override.hpp) as
    // this server last heard it from Redis: 1 + its limit, 0 for none;
    // and the wall-clock ms at which it lapses, 0 for never.
    std::uint64_t override_limit = 0;
    std::uint64_t override_end_ms = 0;
};

// The limit the count's subject has at now_ms: its override while it is
// in force, else `limit`, the zone's.
std::uint64_t local_limit(const LocalCount &count, std::uint64_t limit,
                          std::uint64_t now_ms);

// A request of `cost` units against the share, at now_ms in the window
// that ends at window_end_ms: whether it fits, the units the window admits
// after it (after its cost if it fits), and the ms until the window ends.
// A count of another window is 0.
struct LocalStatus {
    bool fits;
    std::uint64_t remaining;
    std::uint64_t reset_ms;
};

LocalStatus local_status(const LocalCount &count, std::uint64_t share,
                         std::uint64_t window_end_ms, std::uint64_t now_ms,
                         std::uint64_t cost);

// Counts `cost` units in the window that ends at window_end_ms.
void local_add(LocalCount *count, std::uint64_t window_end_ms,
               std::uint64_t cost);

// Notes a request's status (after local_add() if it fitted): a share used
// up keeps the count full until its window ends.
void local_note_full(LocalCount *count, const LocalStatus &status,
                     std::uint64_t now_ms);

// Whether the count holds a used-up share at now_ms: forgetting it would
// admit the subject's share once more, so memory that runs short forgets
// other counts first.
bool local_full(const LocalCount &count, std::uint64_t now_ms);

}  // namespace ratelimit
