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

// A calendar zone's period ends: whole numbers from 1 to 2^53, the first
// before the second, however far apart (not a window's bound).
TEST(WindowRules, CalendarEnds)
{
    constexpr double kInf = std::numeric_limits<double>::infinity();
    constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
    constexpr double kEnd = 9007199254740992.0;    // 2^53

    EXPECT_EQ(static_cast<double>(kMaxPeriodEndMs), kEnd);
    EXPECT_TRUE(calendar_ends_valid(1, 2));
    EXPECT_TRUE(calendar_ends_valid(1, kEnd));
    EXPECT_TRUE(calendar_ends_valid(kEnd - 1, kEnd));
    EXPECT_TRUE(calendar_ends_valid(1711839600000, 1711922400000));

    const double bad[][2] = {
        {0, 1},      {2, 2},        {3, 2},          {-1, 2},
        {1.5, 3},    {1, 2.5},      {1, kEnd + 2},   {kEnd, kEnd + 2},
        {kNaN, 2},   {1, kNaN},     {1, kInf},       {-kInf, 2},
        {1e300, 1e301},
    };

    for (const auto &ends : bad) {
        EXPECT_FALSE(calendar_ends_valid(ends[0], ends[1]))
            << ends[0] << " " << ends[1];
    }
}

// Redis's clock chooses the period: before A the one ending at A, from A
// to B - 1 the one ending at B, from B on none; alike in integers.
TEST(WindowRules, CalendarEnd)
{
    EXPECT_EQ(calendar_end(0.0, 100.0, 250.0), 100.0);
    EXPECT_EQ(calendar_end(99.0, 100.0, 250.0), 100.0);
    EXPECT_EQ(calendar_end(100.0, 100.0, 250.0), 250.0);
    EXPECT_EQ(calendar_end(249.0, 100.0, 250.0), 250.0);
    EXPECT_EQ(calendar_end(250.0, 100.0, 250.0), 0.0);
    EXPECT_EQ(calendar_end(std::uint64_t{99}, std::uint64_t{100},
                           std::uint64_t{250}), 100u);
    EXPECT_EQ(calendar_end(std::uint64_t{300}, std::uint64_t{100},
                           std::uint64_t{250}), 0u);
}

}  // namespace
}  // namespace ratelimit::window_rules
