// Geometry of a sliding window made of fixed-length time buckets.
//
// Time is Redis time in milliseconds since the Unix epoch.  Bucket k covers
// [k * bucket_ms, (k + 1) * bucket_ms); buckets are named by this absolute
// number, never by a position in a ring, so a bucket left over from an
// earlier lap can never be mistaken for a live one.  At time `now` the window
// is the `buckets` newest buckets, the current one included: a count made in
// bucket k leaves the window when bucket k + buckets begins.
#pragma once

#include <cstdint>

#include "limits/policy.hpp"
#include "limits/window_rules.hpp"

namespace ratelimit {

class SlidingWindow {
public:
    explicit SlidingWindow(const Policy &policy)
        : bucket_ms_(policy.bucket_ms), buckets_(policy.buckets()) {}

    std::uint64_t bucket_at(std::uint64_t now_ms) const
    {
        return now_ms / bucket_ms_;
    }

    // The oldest bucket still inside the window at now_ms (0 near the epoch).
    std::uint64_t oldest_live_bucket(std::uint64_t now_ms) const
    {
        std::uint64_t current = bucket_at(now_ms);
        return current + 1 >= buckets_
                   ? window_rules::first_bucket(current, buckets_)
                   : 0;
    }

    // The buckets the status API sums for the last `interval_ms` (1 to the
    // window): the current bucket and the k - 1 before it, k the interval
    // in buckets rounded up, so that no request of the interval is left out.
    std::uint64_t interval_buckets(std::uint64_t interval_ms) const
    {
        return window_rules::interval_buckets(interval_ms, bucket_ms_);
    }

    // Milliseconds from now_ms until the counts of `bucket` leave the window;
    // 0 if they already have.
    std::uint64_t ms_until_expiry(std::uint64_t bucket,
                                  std::uint64_t now_ms) const
    {
        std::uint64_t expiry = window_rules::expiry_ms(bucket, buckets_,
                                                       bucket_ms_);
        return expiry > now_ms ? expiry - now_ms : 0;
    }

private:
    std::uint64_t bucket_ms_;
    std::uint64_t buckets_;
};

// Whole seconds covering ms, rounded up: a client told to wait t seconds must
// find the count gone when it comes back.
constexpr std::uint64_t seconds_ceil(std::uint64_t ms)
{
    return (ms + 999) / 1000;
}

}  // namespace ratelimit
