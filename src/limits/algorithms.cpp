#include "limits/algorithms.hpp"

#include "limits/calendar_zone.hpp"
#include "limits/gcra.hpp"
#include "protocol/batch_protocol.hpp"
#include "limits/window_zone.hpp"

namespace ratelimit {

namespace {

// The second zone argument of every zone but a calendar zone's: the bucket
// length (a fixed or GCRA zone's, the window).
std::uint64_t bucket_length(const Policy &policy)
{
    return policy.bucket_ms;
}

// Buckets of bucket_ms from the epoch on, every zone's but a calendar
// zone's; a GCRA zone keeps none, and neither settles nor leases ask it.
CountedBucket aligned_bucket_at(const Policy &policy, std::uint64_t now_ms)
{
    std::uint64_t number = now_ms / policy.bucket_ms;

    return {number, (number + 1) * policy.bucket_ms};
}

}  // namespace

// Columns in the order of AlgorithmRow, a line each:
//   algorithm, name, wire kind;
//   takes turns, counts per bucket, accepts bucket=, burst=, settles,
//   lease=, arguments per call;
//   named in status, answers ?interval=, its note;
//   quota, window_s, bucket_arg, span, status, used, wait_ms, bucket_at.
constexpr AlgorithmRow kAlgorithms[kAlgorithmCount] = {
    {Algorithm::kSliding, "sliding", kZoneSliding,
     false, true, true, false, true, true, false,
     false, true, "",
     window_quota, window_length_s, bucket_length, window_buckets,
     window_status, window_used, window_wait_ms, aligned_bucket_at},
    {Algorithm::kFixed, "fixed", kZoneFixed,
     false, true, false, false, true, true, false,
     false, true, "fixed window: the count of its current window",
     window_quota, window_length_s, bucket_length, window_buckets,
     window_status, window_used, window_wait_ms, aligned_bucket_at},
    {Algorithm::kGcra, "gcra", kZoneGcra,
     true, false, false, true, false, false, true,
     true, false, "",
     gcra_capacity, gcra_window_s, bucket_length, gcra_capacity,
     gcra_status, gcra_turns_ahead, gcra_wait_ms, aligned_bucket_at},
    {Algorithm::kCalendar, "calendar", kZoneCalendar,
     false, true, false, false, true, true, true,
     true, true, "calendar period: the count of its current period",
     window_quota, calendar_window_s, calendar_first_end,
     calendar_second_end, calendar_status, window_used, window_wait_ms,
     calendar_bucket_at},
};

namespace {

constexpr bool rows_in_enum_order()
{
    for (std::size_t i = 0; i < kAlgorithmCount; i++) {
        if (static_cast<std::size_t>(kAlgorithms[i].algorithm) != i) {
            return false;
        }
    }

    return true;
}

static_assert(rows_in_enum_order(), "row_of() indexes by Algorithm");

}  // namespace

const AlgorithmRow *algorithm_named(std::string_view name)
{
    for (const AlgorithmRow &row : kAlgorithms) {
        if (row.name == name) {
            return &row;
        }
    }

    return nullptr;
}

}  // namespace ratelimit
