// The algorithms of rate zones, one row each: what sets one apart from the
// others, as plain values and, where they count differently, functions of
// the algorithm's own file (window_zone.cpp, gcra.cpp, calendar_zone.cpp).
// Code outside the table asks a zone's row for a column, never which
// algorithm the zone has.  A new algorithm is a value of Algorithm, a row
// here, its file of functions, and its side in the script and the Redis
// module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "limits/policy.hpp"

namespace ratelimit {

struct AlgorithmRow {
    Algorithm algorithm;  // the row's index in kAlgorithms
    // `algorithm=NAME` of ratelimit_zone, and its name in warnings and in
    // the status API.
    std::string_view name;
    // The zone's kind among the script's zone arguments and the Redis
    // module command's: one of protocol/batch_protocol.hpp's kZone*.
    char wire_kind;

    // What a request takes: a turn of the rate, of which 1 + burst come at
    // once and a request may wait for (true), or units of a window's count.
    bool takes_turns;
    // Its counts are kept per bucket of bucket_ms (a fixed window's is the
    // window): another bucket length starts them afresh.
    bool counts_per_bucket;
    bool accepts_bucket;   // bucket=; else one bucket as long as the window
    bool accepts_burst;    // burst=, delay= and nodelay of `ratelimit`
    bool accepts_settles;  // ratelimit_settle
    bool accepts_leases;   // lease=SIZE: quota leases
    // Its script arguments and RateLimit-Policy member are made for each
    // call, not once: a GCRA zone's burst is its location's, a calendar
    // zone's periods follow the clock.
    bool args_per_call;
    // The status API: the zone's object says "type":NAME; the zone answers
    // ?interval=, with this note ("" for none).
    bool named_in_status;
    bool answers_interval;
    std::string_view interval_note;

    // What the headers and the status API call the limit (RateLimit-Policy
    // q=), and its window in seconds (w=), at least 1, of a reply at Redis
    // time `now_ms`.
    std::uint64_t (*quota)(const Policy &policy);
    std::uint64_t (*window_s)(const Policy &policy, std::uint64_t now_ms);
    // The second and third of the script's zone arguments, after the
    // limit: the bucket length in ms, and the buckets of a window or a
    // capacity; a calendar zone's, the ends of its call's periods.
    std::uint64_t (*bucket_arg)(const Policy &policy);
    std::uint64_t (*span)(const Policy &policy);
    // The client's numbers from the script's for the zone: `total`,
    // `oldest` bucket and `over` (see ZoneCount), at Redis time `now_ms`.
    ZoneStatus (*status)(const Policy &policy, std::uint64_t total,
                         std::uint64_t oldest, bool over,
                         std::uint64_t now_ms);
    // What the status API calls used, from the script's `total`.
    std::uint64_t (*used)(const Policy &policy, std::uint64_t total);
    // The milliseconds an admitted request of `cost` waits for its turn,
    // from the script's `total` and its location's delay= (kNoDelay: none).
    std::uint64_t (*wait_ms)(const Policy &policy, std::uint64_t total,
                             std::uint64_t cost, std::uint64_t delay);
    // The bucket a request decided at Redis time `now_ms` was counted in:
    // where its settles and a lease's give-backs go.
    CountedBucket (*bucket_at)(const Policy &policy, std::uint64_t now_ms);
};

constexpr std::size_t kAlgorithmCount = 4;

// In the order of Algorithm.
extern const AlgorithmRow kAlgorithms[kAlgorithmCount];

inline const AlgorithmRow &row_of(const Policy &policy)
{
    return kAlgorithms[static_cast<std::size_t>(policy.algorithm)];
}

// The row whose name is `name`; nullptr if none is.
const AlgorithmRow *algorithm_named(std::string_view name);

}  // namespace ratelimit
