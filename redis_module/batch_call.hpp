// The arguments of one RATELIMIT.DECIDE call, read and checked: the keys,
// each zone's parameters (read once per call, as the script does) and the
// requests' entries (see src/window_script.hpp for their syntax).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "lua_number.hpp"
#include "redis_module_api.hpp"
#include "protocol/batch_protocol.hpp"

namespace ratelimit {

// Numbers are doubles, as in the script (see lua_number.hpp).
struct ZoneParams {
    double limit;
    double bucket_ms;
    double span;            // buckets per window
    bool fixed;
    double gcra;            // a GCRA zone's emission interval (us), else 0;
                            // its `span` is its capacity, 1 + burst
    bool enforce;
    double bucket;          // the current bucket: now / bucket_ms, floored
    double first_bucket;    // the window's oldest
    char bucket_field[lua::kMaxText];  // `bucket` as text, its field name
    char expire_at[lua::kMaxText];     // when a key counted now expires
};

struct Entry {
    char mode;                   // 'c' counts 1, 'w' its costs; 'i'
                                 // interval peek; 's' settle; 'l' lease;
                                 // else peek
    std::string_view zones;      // a byte per zone: its number
    std::vector<double> wanted;  // of 'i': buckets to sum, per zone
    std::vector<double> costs;   // of 'w': units to count, per zone
    double delta, at;            // of 's': units to add (signed), to the
                                 // bucket (fixed: window) of this number
    double asked;                // of 'l': units asked, 0 to 2^53
    const char *error;           // of a malformed 's', of an 'l' that
                                 // fails: its reply's error
    bool solo;                   // "c" and one zone: the script's fast path

    // The units a counted request counts in its zone `i`.
    double cost(std::size_t i) const
    {
        return mode == kEntryCosts ? costs[i] : 1;
    }

    // The keys it takes: a settle takes one, even a malformed one; a lease
    // one per byte after its first ':', even where that fails it.
    std::size_t keys() const
    {
        return mode == kEntrySettle ? 1 : zones.size();
    }

    // The length of the request's reply: a lease's ends with the units it
    // granted.
    std::size_t reply_size() const
    {
        return 1 + kRepliesPerZone * keys()
               + (mode == kEntryInterval ? kIntervalRepliesPerZone * keys()
                                         : 0)
               + (mode == kEntryLease ? kLeaseGrantReplies : 0);
    }
};

struct BatchCall {
    double now_ms;
    double now_us;  // the same Redis time, for GCRA zones
    redis::String **keys;
    std::size_t key_count;
    std::vector<ZoneParams> zones;
    std::vector<Entry> entries;
    std::size_t reply_size;  // of the whole call

    // Reads argv (the command's name first) at Redis time `now_ms`, or
    // `now_us` in microseconds; on malformed arguments returns the error to
    // answer, else nullptr.
    const char *parse(redis::String **argv, int argc, double now_ms,
                      double now_us);
};

// The number of keys a call names, for Redis's getkeys question (the keys
// follow it from argv[2]); -1 if it is not one.
long long declared_keys(redis::String **argv, int argc) noexcept;

}  // namespace ratelimit
