#include "limits/algorithms.hpp"

#include "limits/gcra.hpp"
#include "protocol/batch_protocol.hpp"
#include "limits/window_zone.hpp"

namespace ratelimit {

// Columns in the order of AlgorithmRow, a line each:
//   algorithm, name, wire kind;
//   takes turns, counts per bucket, accepts bucket=, burst=, settles,
//   lease=;
//   named in status, answers ?interval=, its note;
//   quota, window_s, span, status, used, wait_ms.
constexpr AlgorithmRow kAlgorithms[kAlgorithmCount] = {
    {Algorithm::kSliding, "sliding", kZoneSliding,
     false, true, true, false, true, true,
     false, true, "",
     window_quota, window_length_s, window_buckets, window_status,
     window_used, window_wait_ms},
    {Algorithm::kFixed, "fixed", kZoneFixed,
     false, true, false, false, true, true,
     false, true, "fixed window: the count of its current window",
     window_quota, window_length_s, window_buckets, window_status,
     window_used, window_wait_ms},
    {Algorithm::kGcra, "gcra", kZoneGcra,
     true, false, false, true, false, false,
     true, false, "",
     gcra_capacity, gcra_window_s, gcra_capacity, gcra_status,
     gcra_turns_ahead, gcra_wait_ms},
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
