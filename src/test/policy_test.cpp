#include "limits/policy.hpp"

#include <cstdint>
#include <optional>
#include <string>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

constexpr std::uint64_t kTwoTo53 = std::uint64_t{1} << 53;

TEST(ParseRate, AcceptsEveryUnit)
{
    struct Case {
        const char *text;
        std::uint64_t limit;
        std::uint64_t window_ms;
    };
    const Case cases[] = {
        {"100r/s", 100, 1000},
        {"10r/m", 10, 60000},
        {"5r/h", 5, 3600000},
        {"1r/d", 1, 86400000},
        {"1r/s", 1, 1000},
    };

    for (const Case &c : cases) {
        SCOPED_TRACE(c.text);
        auto rate = parse_rate(c.text);
        ASSERT_TRUE(rate.has_value());
        EXPECT_EQ(rate->limit, c.limit);
        EXPECT_EQ(rate->window_ms, c.window_ms);
    }
}

TEST(ParseRate, AcceptsTwoTo53)
{
    auto rate = parse_rate(std::to_string(kTwoTo53) + "r/m");
    ASSERT_TRUE(rate.has_value());
    EXPECT_EQ(rate->limit, kTwoTo53);
    EXPECT_EQ(rate->window_ms, 60000u);
}

TEST(ParseRate, RejectsMalformed)
{
    const std::string cases[] = {
        "0r/s", "r/s", "-1r/s", "+1r/s", "10r/x", "10 r/s", " 10r/s",
        "10r/s ", "10r/", "10r", "10", "", "1.5r/s", "1e3r/s", "10rs",
        "10/s", "10x/s", "0x10r/s", "10r/sec", "10R/s", "10r\\s",
        std::to_string(kTwoTo53 + 1) + "r/s",
        "18446744073709551615r/s",
        "18446744073709551616r/s",
        "99999999999999999999999999r/s",
        std::string("1\0r/s", 5),
    };

    for (const std::string &text : cases) {
        SCOPED_TRACE(text);
        EXPECT_FALSE(parse_rate(text).has_value());
    }
}

TEST(ParseRate, IgnoresBytesAfterTheView)
{
    const char text[] = "10r/sX";
    auto rate = parse_rate(std::string_view(text, 5));
    ASSERT_TRUE(rate.has_value());
    EXPECT_EQ(rate->limit, 10u);
    EXPECT_EQ(rate->window_ms, 1000u);
}

TEST(ParseCount, AcceptsPositiveIntegers)
{
    EXPECT_EQ(parse_count("1"), std::uint64_t{1});
    EXPECT_EQ(parse_count("42"), std::uint64_t{42});
    EXPECT_EQ(parse_count("1000000"), std::uint64_t{1000000});
    EXPECT_EQ(parse_count(std::to_string(kTwoTo53)), kTwoTo53);
    EXPECT_EQ(parse_count(std::to_string(kTwoTo53 - 1)), kTwoTo53 - 1);
}

// A cost or a settle's value may be 0; the rest is as parse_count's.
TEST(ParseUnits, TakesZeroAndWhatParseCountTakes)
{
    EXPECT_EQ(parse_units("0"), std::uint64_t{0});
    EXPECT_EQ(parse_units("00"), std::uint64_t{0});
    EXPECT_EQ(parse_units("1200"), std::uint64_t{1200});
    EXPECT_EQ(parse_units(std::to_string(kTwoTo53)), kTwoTo53);

    for (const std::string text : {"", "-1", "+1", " 1", "1.5", "abc",
                                   "9007199254740993"}) {
        SCOPED_TRACE(text);
        EXPECT_FALSE(parse_units(text).has_value());
    }
}

TEST(ParseCount, RejectsMalformed)
{
    const std::string cases[] = {
        "", "0", "00", "-1", "+1", " 1", "1 ", "1.5", "1e3", "0x10", "abc",
        "1r/s", "12a",
        std::to_string(kTwoTo53 + 1),
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999999",
        std::string("1\0", 2),
    };

    for (const std::string &text : cases) {
        SCOPED_TRACE(text);
        EXPECT_FALSE(parse_count(text).has_value());
    }
}

// A variable's value: a count for limit=, a rate for rate=, scaled to the
// zone's window and rounded down.
TEST(LimitFromValue, Counts)
{
    EXPECT_EQ(limit_from_value("5", false, 60000), std::uint64_t{5});
    EXPECT_EQ(limit_from_value("100", false, 1), std::uint64_t{100});
    EXPECT_EQ(limit_from_value(std::to_string(kTwoTo53), false, 1000),
              kTwoTo53);

    const std::string bad[] = {
        "", "0", "-1", " 5", "5 ", "1.5", "10r/s", "abc", "$x",
        std::to_string(kTwoTo53 + 1), std::string("5\0", 2),
    };

    for (const std::string &text : bad) {
        SCOPED_TRACE(text);
        EXPECT_FALSE(limit_from_value(text, false, 60000).has_value());
    }
}

TEST(LimitFromValue, RatesInTheZonesWindow)
{
    struct Case {
        const char *text;
        std::uint64_t window_ms;
        std::uint64_t limit;
    };
    const Case cases[] = {
        {"10r/s", 60000, 600},
        {"600r/m", 60000, 600},
        {"36000r/h", 60000, 600},
        {"10r/m", 60000, 10},
        {"10r/s", 1000, 10},
        {"10r/s", 500, 5},
        {"90r/h", 60000, 1},           // 1.5, rounded down
        {"1r/s", 3600000, 3600},
        {"1r/d", 86400000, 1},
        {"2r/d", 604800000, 14},
        {"9007199254740992r/d", 86400000, kTwoTo53},
        {"1r/s", 604800000000000, 604800000000},  // 1000000w
    };

    for (const Case &c : cases) {
        SCOPED_TRACE(c.text);
        EXPECT_EQ(limit_from_value(c.text, true, c.window_ms),
                  std::optional<std::uint64_t>(c.limit));
    }

    const Case bad[] = {
        {"1r/h", 60000, 0},            // under one request a window
        {"59r/h", 60000, 0},
        {"1r/s", 999, 0},
        {"9007199254740992r/s", 2000, 0},  // over 2^53
        {"5", 60000, 0},
        {"0r/s", 60000, 0},
        {"10r/x", 60000, 0},
        {"", 60000, 0},
    };

    for (const Case &c : bad) {
        SCOPED_TRACE(c.text);
        EXPECT_FALSE(limit_from_value(c.text, true, c.window_ms).has_value());
    }
}

TEST(DefaultBucketMs, KnownWindows)
{
    EXPECT_EQ(default_bucket_ms(60000), 1000u);
    EXPECT_EQ(default_bucket_ms(1000), 20u);
    EXPECT_EQ(default_bucket_ms(3600000), 60000u);
    EXPECT_EQ(default_bucket_ms(86400000), 1440000u);
    EXPECT_EQ(default_bucket_ms(2000), 40u);
    EXPECT_EQ(default_bucket_ms(60), 1u);
    EXPECT_EQ(default_bucket_ms(7), 1u);
    EXPECT_EQ(default_bucket_ms(2), 1u);
    EXPECT_EQ(default_bucket_ms(1), 1u);
    // 7919 is prime: no n in 2..60 divides it, so one bucket.
    EXPECT_EQ(default_bucket_ms(7919), 7919u);
    // 61 * 67: both factors exceed 60.
    EXPECT_EQ(default_bucket_ms(4087), 4087u);
    // 59 * 61: 59 is the only usable factor.
    EXPECT_EQ(default_bucket_ms(3599), 61u);
}

void check_default_bucket(std::uint64_t window_ms)
{
    SCOPED_TRACE(window_ms);
    std::uint64_t bucket = default_bucket_ms(window_ms);

    ASSERT_GT(bucket, 0u);
    ASSERT_EQ(window_ms % bucket, 0u);
    std::uint64_t n = window_ms / bucket;
    EXPECT_LE(n, kMaxDefaultBuckets);

    for (std::uint64_t m = n + 1; m <= kMaxDefaultBuckets; m++) {
        EXPECT_NE(window_ms % m, 0u) << "n = " << m << " also divides";
    }
}

TEST(DefaultBucketMs, DividesAndIsMaximal)
{
    for (std::uint64_t w = 1; w <= 5000; w++) {
        check_default_bucket(w);
    }
    const std::uint64_t windows[] = {
        60000, 3600000, 86400000, 7919, 999999937, std::uint64_t{1} << 40,
        kTwoTo53, std::uint64_t{2} * 3 * 5 * 7 * 11 * 13 * 17 * 19 * 23,
    };
    for (std::uint64_t w : windows) {
        check_default_bucket(w);
    }
}

TEST(PolicyStruct, BucketsAndWindowSeconds)
{
    Policy minute{10, 60000, 1000};
    EXPECT_EQ(minute.buckets(), 60u);
    EXPECT_EQ(minute.window_seconds(), 60u);

    Policy second{5, 1000, 20};
    EXPECT_EQ(second.buckets(), 50u);
    EXPECT_EQ(second.window_seconds(), 1u);

    Policy odd{5, 1500, 25};
    EXPECT_EQ(odd.buckets(), 60u);
    EXPECT_EQ(odd.window_seconds(), 2u);

    Policy tiny{1, 1, 1};
    EXPECT_EQ(tiny.buckets(), 1u);
    EXPECT_EQ(tiny.window_seconds(), 1u);

    Policy just_over{1, 1001, 1001};
    EXPECT_EQ(just_over.buckets(), 1u);
    EXPECT_EQ(just_over.window_seconds(), 2u);

    Policy day{1, 86400000, default_bucket_ms(86400000)};
    EXPECT_EQ(day.buckets(), 60u);
    EXPECT_EQ(day.window_seconds(), 86400u);
}

// Zero, as a limit or a rate, blocks the subject; a value that is no
// limit at all does not.
TEST(Policy, BlocksAll)
{
    EXPECT_TRUE(blocks_all("0", false));
    EXPECT_TRUE(blocks_all("000", false));
    EXPECT_TRUE(blocks_all("0r/s", true));
    EXPECT_TRUE(blocks_all("0r/d", true));
    EXPECT_FALSE(blocks_all("0r/s", false));
    EXPECT_FALSE(blocks_all("0", true));
    EXPECT_FALSE(blocks_all("0r/x", true));
    EXPECT_FALSE(blocks_all("1", false));
    EXPECT_FALSE(blocks_all("-0", false));
    EXPECT_FALSE(blocks_all("", false));
    EXPECT_FALSE(blocks_all("r/s", true));
    EXPECT_FALSE(blocks_all("abc", false));
}

}  // namespace
}  // namespace ratelimit
