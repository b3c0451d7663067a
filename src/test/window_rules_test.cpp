#include "limits/window_rules.hpp"

#include <cstdint>
#include <limits>

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

// What nginx can send is valid, up to the largest limit and window; NaN,
// infinities, fractions, 0 and anything larger are not, but a side zone's
// limit 0.
TEST(WindowRules, ZoneNumbers)
{
    constexpr double kInf = std::numeric_limits<double>::infinity();
    constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
    constexpr double kLimit = 9007199254740992.0;    // 2^53
    constexpr double kWindow = 604800000000000.0;    // 1000000w

    for (bool side : {false, true}) {
        EXPECT_TRUE(zone_numbers_valid(3, 1000, 60, side));
        EXPECT_TRUE(zone_numbers_valid(1, 1, 1, side));
        EXPECT_TRUE(zone_numbers_valid(kLimit, kWindow, 1, side));
        EXPECT_TRUE(zone_numbers_valid(kLimit, 1, kWindow, side));
        EXPECT_TRUE(zone_numbers_valid(3, kWindow / 60, 60, side));
    }

    EXPECT_EQ(static_cast<double>(kMaxLimit), kLimit);
    EXPECT_EQ(static_cast<double>(kMaxWindowMs), kWindow);

    const double bad[][3] = {
        {kInf, 1000, 60},    {3, kInf, 60},       {3, 1000, kInf},
        {kNaN, 1000, 60},    {3, kNaN, 60},       {3, 1000, kNaN},
        {-kInf, 1000, 60},   {3, 1e-300, 60},     {3, 1000, 1e-300},
        {3, 1e300, 60},      {3, 1000, 1e300},    {1e300, 1000, 60},
        {-3, 1000, 60},      {3, 0, 60},          {0.5, 1000, 60},
        {3, 1000, 0},        {3, -1000, 60},      {3, 1000, -60},
        {2.5, 1000, 60},     {3, 0.5, 60},        {3, 1000, 1.5},
        {kLimit + 2, 1000, 60},                   {3, kWindow + 1, 1},
        {3, kWindow, 2},     {3, 1e15, 1000},     {3, 1e8, 1e8},
        {0, 0, 60},          {0, 1000, 0},        {0, kWindow, 2},
    };

    for (const auto &z : bad) {
        for (bool side : {false, true}) {
            EXPECT_FALSE(zone_numbers_valid(z[0], z[1], z[2], side))
                << z[0] << " " << z[1] << " " << z[2] << " side " << side;
        }
    }

    // Limit 0: a side zone's only, whatever its window.
    EXPECT_FALSE(zone_numbers_valid(0, 1000, 60, false));
    EXPECT_FALSE(zone_numbers_valid(-0.0, 1000, 60, false));
    EXPECT_TRUE(zone_numbers_valid(0, 1000, 60, true));
    EXPECT_TRUE(zone_numbers_valid(0, kWindow, 1, true));
    EXPECT_TRUE(zone_numbers_valid(0, 1, 1, true));
}

}  // namespace
}  // namespace ratelimit::window_rules
