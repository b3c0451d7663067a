#include "limits/window_rules.hpp"

#include <cstdint>

#include <gtest/gtest.h>

namespace ratelimit::window_rules {
namespace {

// The nginx module's unsigned milliseconds and the Redis module's doubles
// (the script's Lua numbers) give the same buckets.
TEST(WindowRules, SameInIntegersAndDoubles)
{
    std::uint64_t current = 1700000000, span = 60, bucket_ms = 1000;

    EXPECT_EQ(first_bucket(current, span), 1699999941u);
    EXPECT_EQ(first_bucket(1700000000.0, 60.0), 1699999941.0);
    EXPECT_EQ(expiry_ms(current, span, bucket_ms), 1700000060000u);
    EXPECT_EQ(expiry_ms(1700000000.0, 60.0, 1000.0), 1700000060000.0);
    EXPECT_EQ(interval_floor(current, std::uint64_t{20}), 1699999980u);
    EXPECT_EQ(interval_buckets(std::uint64_t{2500}, bucket_ms), 3u);
    EXPECT_EQ(interval_buckets(std::uint64_t{3000}, bucket_ms), 3u);
}

// A key's newest bucket ahead of the clock by at most a window is counted
// in; further ahead, or behind, the current bucket is.
TEST(WindowRules, ClockSteppedBack)
{
    EXPECT_TRUE(clock_stepped_back(100.0, 101.0, 60.0));
    EXPECT_TRUE(clock_stepped_back(100.0, 160.0, 60.0));
    EXPECT_FALSE(clock_stepped_back(100.0, 161.0, 60.0));
    EXPECT_FALSE(clock_stepped_back(100.0, 100.0, 60.0));
    EXPECT_FALSE(clock_stepped_back(100.0, 40.0, 60.0));
}

}  // namespace
}  // namespace ratelimit::window_rules
