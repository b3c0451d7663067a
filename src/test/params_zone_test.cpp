#include "params/zone_params.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

// What a case prints when it fails.
std::string joined(const ParamTokens &tokens)
{
    std::string line;

    for (std::string_view t : tokens) {
        line.append(line.empty() ? "" : " ").append(t);
    }

    return line;
}

TEST(ParseZoneParams, RateZones)
{
    struct Case {
        ParamTokens args;
        std::uint64_t limit, window_ms, bucket_ms;
        bool fixed;
    };
    const Case cases[] = {
        {{"z1", "key=$binary_remote_addr", "rate=10r/s"}, 10, 1000, 20, false},
        {{"z2", "key=$k", "rate=10r/m"}, 10, 60000, 1000, false},
        {{"z3", "key=$host:$k", "rate=5r/h"}, 5, 3600000, 60000, false},
        {{"z4", "key=$k", "rate=1r/d"}, 1, 86400000, 1440000, false},
        {{"z5", "key=$k", "limit=5", "window=2s"}, 5, 2000, 40, false},
        {{"z6", "key=$k", "limit=10", "window=1s", "bucket=100ms"},
         10, 1000, 100, false},
        {{"z7", "key=$k", "limit=3", "window=1m", "bucket=1s"},
         3, 60000, 1000, false},
        {{"z8", "key=$k", "limit=7", "window=61ms"}, 7, 61, 61, false},
        {{"z9", "key=$k", "rate=100r/s", "bucket=50ms"}, 100, 1000, 50, false},
        {{"z-1.a_B", "window=1s", "limit=5", "key=x"}, 5, 1000, 20, false},
        {{"f", "key=$k", "rate=10r/s", "algorithm=fixed"},
         10, 1000, 1000, true},
        {{"s", "key=$k", "rate=10r/s", "algorithm=sliding"},
         10, 1000, 20, false},
        {{"g", "key=$k", "rate=10r/s", "algorithm=gcra"},
         10, 1000, 1000, false},
        {{"b", "key=$k", "limit=2", "window=1s", "bucket=1s"},
         2, 1000, 1000, false},
        {{"w", "key=$k", "limit=1", "window=1m30s"}, 1, 90000, 1500, false},
        {{"y", "key=$k", "limit=9007199254740992", "window=1000000w"},
         9007199254740992u, 604800000000000u, 10080000000000u, false},
    };

    for (const Case &c : cases) {
        SCOPED_TRACE(joined(c.args));
        auto result = parse_zone_params(c.args);
        ASSERT_FALSE(result.error.has_value()) << result.error->text;
        const ZoneParams &zone = result.params;
        EXPECT_EQ(zone.kind, ZoneKind::kRate);
        EXPECT_EQ(zone.name, c.args[0]);
        EXPECT_EQ(zone.policy.limit, c.limit);
        EXPECT_EQ(zone.policy.window_ms, c.window_ms);
        EXPECT_EQ(zone.policy.bucket_ms, c.bucket_ms);
        EXPECT_EQ(zone.policy.algorithm == Algorithm::kFixed, c.fixed);
    }
}

// `limit=$NAME` and `rate=$NAME`: the variable is kept for nginx to
// compile, the window and buckets are the zone's, as for a number.
TEST(ParseZoneParams, LimitsFromVariables)
{
    struct Case {
        ParamTokens args;
        std::string_view variable;
        bool rate;
        std::uint64_t window_ms, bucket_ms;
        bool fixed;
    };
    const Case cases[] = {
        {{"p", "key=$k", "limit=$plan_limit", "window=1m"},
         "$plan_limit", false, 60000, 1000, false},
        {{"p", "key=$k", "window=10s", "limit=$a$b", "bucket=5s"},
         "$a$b", false, 10000, 5000, false},
        {{"p", "key=$k", "limit=${plan}", "window=1h", "algorithm=fixed"},
         "${plan}", false, 3600000, 3600000, true},
        {{"p", "key=$k", "rate=$plan_rate", "window=1m"},
         "$plan_rate", true, 60000, 1000, false},
        {{"p", "key=$k", "rate=$r", "window=1s", "bucket=100ms"},
         "$r", true, 1000, 100, false},
    };

    for (const Case &c : cases) {
        SCOPED_TRACE(joined(c.args));
        auto result = parse_zone_params(c.args);
        ASSERT_FALSE(result.error.has_value()) << result.error->text;
        const ZoneParams &zone = result.params;
        EXPECT_EQ(zone.kind, ZoneKind::kRate);
        EXPECT_EQ(zone.limit_variable, c.variable);
        EXPECT_EQ(zone.limit_is_rate, c.rate);
        EXPECT_EQ(zone.policy.limit, 0u);
        EXPECT_EQ(zone.policy.window_ms, c.window_ms);
        EXPECT_EQ(zone.policy.bucket_ms, c.bucket_ms);
        EXPECT_EQ(zone.policy.algorithm == Algorithm::kFixed, c.fixed);
    }
}

// window=day|week|month|year: a calendar zone, its period, start= and tz=
// as read; algorithm=fixed names it too, limit=$NAME is a plan's.
TEST(ParseZoneParams, CalendarZones)
{
    struct Case {
        ParamTokens args;
        PeriodKind period;
        std::string_view tz;
        std::uint64_t window_ms;
    };
    const Case cases[] = {
        {{"m", "key=$k", "limit=1000000", "window=month",
          "tz=Europe/Berlin"},
         PeriodKind::kMonth, "Europe/Berlin", 31 * 86400000ull},
        {{"d", "key=$k", "limit=5", "window=day", "algorithm=fixed"},
         PeriodKind::kDay, "", 86400000},
        {{"w", "key=$k", "limit=$plan", "window=week", "start=sun",
          "tz=UTC"},
         PeriodKind::kWeek, "UTC", 7 * 86400000ull},
        {{"y", "key=$k", "limit=5", "window=year", "algorithm=calendar",
          "start=04-01", "lease=1m"},
         PeriodKind::kYear, "", 366 * 86400000ull},
    };

    for (const Case &c : cases) {
        SCOPED_TRACE(joined(c.args));
        auto result = parse_zone_params(c.args);
        ASSERT_FALSE(result.error.has_value()) << result.error->text;
        const ZoneParams &zone = result.params;
        EXPECT_EQ(zone.policy.algorithm, Algorithm::kCalendar);
        EXPECT_EQ(zone.period, c.period);
        EXPECT_EQ(zone.tz, c.tz);
        EXPECT_EQ(zone.policy.window_ms, c.window_ms);
        EXPECT_EQ(zone.policy.bucket_ms, c.window_ms);
        EXPECT_TRUE(zone.warnings.empty());
    }

    auto week = parse_zone_params(cases[2].args);
    EXPECT_EQ(week.params.period_start.weekday, 6);
    EXPECT_EQ(week.params.limit_variable, "$plan");
    auto year = parse_zone_params(cases[3].args);
    EXPECT_EQ(year.params.period_start.month, 4);
    EXPECT_EQ(year.params.period_start.day, 1);
    EXPECT_EQ(year.params.lease_bytes, 1024u * 1024);
}

TEST(ParseZoneParams, NumbersHaveNoVariable)
{
    for (ParamTokens args : {ParamTokens{"a", "key=$k", "rate=10r/s"},
                             ParamTokens{"a", "key=$k", "limit=5",
                                         "window=1s"}})
    {
        SCOPED_TRACE(joined(args));
        auto result = parse_zone_params(args);
        ASSERT_FALSE(result.error.has_value());
        EXPECT_TRUE(result.params.limit_variable.empty());
        EXPECT_FALSE(result.params.limit_is_rate);
    }
}

TEST(ParseZoneParams, KeyIsTheTextAfterKeyEquals)
{
    auto result = parse_zone_params({"api", "key=$host:$http_x=a",
                                     "rate=1r/s"});
    ASSERT_FALSE(result.error.has_value());
    EXPECT_EQ(result.params.key, "$host:$http_x=a");
}

TEST(ParseZoneParams, ConcurrencyZones)
{
    struct Case {
        ParamTokens args;
        std::uint64_t limit, queue, queue_timeout_ms, lease_ms;
    };
    const Case cases[] = {
        {{"c", "key=$k", "concurrency=2"}, 2, 0, 10000, 10000},
        {{"c", "key=$k", "concurrency=5", "queue=0"}, 5, 0, 10000, 10000},
        {{"c", "key=$k", "concurrency=1", "queue=10", "queue_timeout=3s"},
         1, 10, 3000,
         10000},
        {{"c", "lease=300ms", "key=$k", "concurrency=1"}, 1, 0, 10000, 300},
        {{"c", "key=$k", "concurrency=9007199254740992", "lease=1h"},
         9007199254740992u,
         0, 10000, 3600000},
    };

    for (const Case &c : cases) {
        SCOPED_TRACE(joined(c.args));
        auto result = parse_zone_params(c.args);
        ASSERT_FALSE(result.error.has_value()) << result.error->text;
        const ConcurrencyPolicy &p = result.params.concurrency;
        EXPECT_EQ(result.params.kind, ZoneKind::kConcurrency);
        EXPECT_EQ(result.params.key, "$k");
        EXPECT_EQ(p.limit, c.limit);
        EXPECT_EQ(p.queue, c.queue);
        EXPECT_EQ(p.queue_timeout_ms, c.queue_timeout_ms);
        EXPECT_EQ(p.lease_ms, c.lease_ms);
    }
}

TEST(ParseZoneParams, LeaseSizeOfRateZones)
{
    struct Case {
        ParamTokens tokens;
        std::uint64_t bytes;
    };
    const Case cases[] = {
        {{"z", "key=$k", "rate=10r/s"}, 0},
        {{"z", "key=$k", "rate=10r/s", "lease=1m"}, 1024 * 1024},
        {{"z", "key=$k", "limit=5", "window=1m", "lease=64k"}, 64 * 1024},
        {{"z", "key=$k", "limit=5", "window=1m", "algorithm=fixed",
          "lease=32768"}, 32768},
    };

    for (const Case &c : cases) {
        auto result = parse_zone_params(c.tokens);
        ASSERT_FALSE(result.error) << joined(c.tokens);
        EXPECT_EQ(result.params.lease_bytes, c.bytes);
    }

    const ParamTokens refused[] = {
        {"z", "key=$k", "rate=10r/s", "lease=16k"},
        {"z", "key=$k", "rate=10r/s", "lease=1g"},
        {"z", "key=$k", "rate=10r/s", "lease=m"},
        {"z", "key=$k", "rate=10r/s", "lease=10s"},
        {"z", "key=$k", "rate=10r/s", "algorithm=gcra", "lease=1m"},
    };

    for (const ParamTokens &tokens : refused) {
        auto result = parse_zone_params(tokens);
        ASSERT_TRUE(result.error) << joined(tokens);
        EXPECT_NE(result.error->text.find("lease"), std::string::npos)
            << result.error->text;
    }
}

TEST(ParseZoneParams, BanOfRateZones)
{
    struct Case {
        ParamTokens tokens;
        std::uint64_t ban_ms;
    };
    const Case cases[] = {
        {{"z", "key=$k", "rate=10r/s"}, 0},
        {{"z", "key=$k", "rate=10r/s", "ban=1s"}, 1000},
        {{"z", "key=$k", "limit=5", "window=15m", "ban=1h"}, 3600000},
        {{"z", "key=$k", "rate=1r/s", "algorithm=gcra", "ban=15m"}, 900000},
        {{"z", "key=$k", "limit=5", "window=day", "ban=365d"},
         365ull * 86400000},
    };

    for (const Case &c : cases) {
        auto result = parse_zone_params(c.tokens);
        ASSERT_FALSE(result.error) << joined(c.tokens);
        EXPECT_EQ(result.params.ban_ms, c.ban_ms);
    }
}

TEST(ParseZoneParams, TopOfRateZones)
{
    struct Case {
        ParamTokens tokens;
        std::uint32_t top;
    };
    const Case cases[] = {
        {{"z", "key=$k", "rate=10r/s"}, kTopDefault},
        {{"z", "key=$k", "rate=10r/s", "top=8"}, 8},
        {{"z", "key=$k", "limit=5", "window=15m", "top=1024"}, 1024},
        {{"z", "key=$k", "rate=1r/s", "algorithm=gcra", "top=off"}, 0},
    };

    for (const Case &c : cases) {
        auto result = parse_zone_params(c.tokens);
        ASSERT_FALSE(result.error) << joined(c.tokens);
        EXPECT_EQ(result.params.top, c.top);
    }
}

}  // namespace
}  // namespace ratelimit
