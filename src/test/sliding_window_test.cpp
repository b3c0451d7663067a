#include "limits/sliding_window.hpp"

#include <cstdint>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

// 60 buckets of 1000 ms.
const Policy kMinute{10, 60000, 1000};

TEST(SlidingWindow, BucketAtBoundaries)
{
    SlidingWindow w(kMinute);
    EXPECT_EQ(w.bucket_at(0), 0u);
    EXPECT_EQ(w.bucket_at(999), 0u);
    EXPECT_EQ(w.bucket_at(1000), 1u);
    EXPECT_EQ(w.bucket_at(1999), 1u);
    EXPECT_EQ(w.bucket_at(2000), 2u);
    EXPECT_EQ(w.bucket_at(1700000000123), 1700000000u);
    EXPECT_EQ(w.bucket_at(1700000000999), 1700000000u);
    EXPECT_EQ(w.bucket_at(1700000001000), 1700000001u);

    SlidingWindow fine(Policy{5, 1000, 20});
    EXPECT_EQ(fine.bucket_at(19), 0u);
    EXPECT_EQ(fine.bucket_at(20), 1u);
    EXPECT_EQ(fine.bucket_at(1700000000123), 85000000006u);
}

TEST(SlidingWindow, OldestLiveBucket)
{
    SlidingWindow w(kMinute);
    // Current bucket 1700000000, 60 buckets: 1699999941..1700000000.
    EXPECT_EQ(w.oldest_live_bucket(1700000000123), 1699999941u);
    EXPECT_EQ(w.oldest_live_bucket(1700000000999), 1699999941u);
    EXPECT_EQ(w.oldest_live_bucket(1700000001000), 1699999942u);
    EXPECT_EQ(w.oldest_live_bucket(59000), 0u);
    EXPECT_EQ(w.oldest_live_bucket(59999), 0u);
    EXPECT_EQ(w.oldest_live_bucket(60000), 1u);
}

TEST(SlidingWindow, OldestLiveBucketSaturatesNearEpoch)
{
    SlidingWindow w(kMinute);
    EXPECT_EQ(w.oldest_live_bucket(0), 0u);
    EXPECT_EQ(w.oldest_live_bucket(1), 0u);
    EXPECT_EQ(w.oldest_live_bucket(30000), 0u);

    SlidingWindow single(Policy{1, 1000, 1000});
    EXPECT_EQ(single.oldest_live_bucket(0), 0u);
    EXPECT_EQ(single.oldest_live_bucket(999), 0u);
    EXPECT_EQ(single.oldest_live_bucket(1000), 1u);
    EXPECT_EQ(single.oldest_live_bucket(123456), 123u);
}

TEST(SlidingWindow, WindowHoldsExactlyBucketsBuckets)
{
    const Policy policies[] = {
        kMinute, Policy{5, 1000, 20}, Policy{1, 7, 1}, Policy{1, 1000, 1000},
        Policy{3, 3600000, 60000},
    };

    for (const Policy &p : policies) {
        SlidingWindow w(p);
        for (std::uint64_t now : {p.window_ms * 5, p.window_ms * 5 + 1,
                                  p.window_ms * 1000 + p.bucket_ms - 1,
                                  std::uint64_t{1700000000123}})
        {
            SCOPED_TRACE(now);
            EXPECT_EQ(w.bucket_at(now) - w.oldest_live_bucket(now) + 1,
                      p.buckets());
        }
    }
}

TEST(SlidingWindow, MsUntilExpiry)
{
    SlidingWindow w(kMinute);
    // Bucket k expires at (k + 60) * 1000.
    EXPECT_EQ(w.ms_until_expiry(1699999941, 1700000000123), 877u);
    EXPECT_EQ(w.ms_until_expiry(1700000000, 1700000000123), 59877u);
    EXPECT_EQ(w.ms_until_expiry(1700000000, 1700000000000), 60000u);
    EXPECT_EQ(w.ms_until_expiry(1699999941, 1700000000999), 1u);
    EXPECT_EQ(w.ms_until_expiry(1699999941, 1700000001000), 0u);
    EXPECT_EQ(w.ms_until_expiry(1699999940, 1700000000123), 0u);
    EXPECT_EQ(w.ms_until_expiry(1, 1700000000123), 0u);
    EXPECT_EQ(w.ms_until_expiry(0, 0), 60000u);
    EXPECT_EQ(w.ms_until_expiry(0, 59999), 1u);
    EXPECT_EQ(w.ms_until_expiry(0, 60000), 0u);
}

TEST(SlidingWindow, OldestLiveBucketExpiresWithinOneBucket)
{
    SlidingWindow w(Policy{5, 1000, 20});

    for (std::uint64_t now = 5000; now < 7000; now += 7) {
        SCOPED_TRACE(now);
        std::uint64_t oldest = w.oldest_live_bucket(now);
        std::uint64_t left = w.ms_until_expiry(oldest, now);
        EXPECT_GE(left, 1u);
        EXPECT_LE(left, 20u);
        EXPECT_EQ(left, 20 - now % 20);
        EXPECT_EQ(w.ms_until_expiry(oldest - 1, now), 0u);
    }
}

TEST(SlidingWindow, IdleGapLeavesOldBucketsBehind)
{
    SlidingWindow w(kMinute);
    std::uint64_t then = 1700000000123;
    std::uint64_t old = w.bucket_at(then);

    std::uint64_t just_inside = then + 59000;
    EXPECT_EQ(w.oldest_live_bucket(just_inside), old);
    EXPECT_GT(w.ms_until_expiry(old, just_inside), 0u);

    std::uint64_t just_outside = then - 123 + 60000;
    EXPECT_GT(w.oldest_live_bucket(just_outside), old);
    EXPECT_EQ(w.ms_until_expiry(old, just_outside), 0u);

    std::uint64_t later = then + 3 * 60000 + 5000;
    EXPECT_LT(old, w.oldest_live_bucket(later));
    EXPECT_EQ(w.ms_until_expiry(old, later), 0u);
}

// Rounded up to whole buckets; a fixed window is one bucket, the window.
TEST(SlidingWindow, IntervalBuckets)
{
    SlidingWindow w(kMinute);
    EXPECT_EQ(w.interval_buckets(1), 1u);
    EXPECT_EQ(w.interval_buckets(1000), 1u);
    EXPECT_EQ(w.interval_buckets(1001), 2u);
    EXPECT_EQ(w.interval_buckets(20000), 20u);
    EXPECT_EQ(w.interval_buckets(59999), 60u);
    EXPECT_EQ(w.interval_buckets(60000), 60u);

    SlidingWindow fine(Policy{10, 1000, 20});
    EXPECT_EQ(fine.interval_buckets(500), 25u);
    EXPECT_EQ(fine.interval_buckets(1), 1u);

    SlidingWindow fixed(Policy{10, 10000, 10000});
    EXPECT_EQ(fixed.interval_buckets(1), 1u);
    EXPECT_EQ(fixed.interval_buckets(10000), 1u);
}

TEST(SecondsCeil, RoundsUp)
{
    EXPECT_EQ(seconds_ceil(0), 0u);
    EXPECT_EQ(seconds_ceil(1), 1u);
    EXPECT_EQ(seconds_ceil(999), 1u);
    EXPECT_EQ(seconds_ceil(1000), 1u);
    EXPECT_EQ(seconds_ceil(1001), 2u);
    EXPECT_EQ(seconds_ceil(59877), 60u);
    EXPECT_EQ(seconds_ceil(60000), 60u);
    static_assert(seconds_ceil(2000) == 2);
}

}  // namespace
}  // namespace ratelimit
