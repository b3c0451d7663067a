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
        {{"b", "key=$k", "limit=2", "window=1s", "bucket=1s"},
         2, 1000, 1000, false},
        {{"w", "key=$k", "limit=1", "window=1m30s"}, 1, 90000, 1500, false},
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
        EXPECT_EQ(zone.fixed, c.fixed);
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

// Each bad directive, the exact text nginx prints, and the token it is
// about (-1: the directive as a whole).
struct BadCase {
    ParamTokens args;
    const char *text;
    int token;
};

const BadCase kBadZones[] = {
    // t/00-config.t
    {{"api", "key=$a", "rate=0r/s"},
     "invalid rate \"0r/s\": use Nr/s, Nr/m, Nr/h or Nr/d with N > 0", -1},
    {{"api", "key=$a", "limit=10", "window=1s", "bucket=300ms"},
     "bucket \"300ms\" does not divide the window of 1000 ms into whole "
     "buckets", -1},
    {{"api", "key=$a", "rate=10r/s", "foo=bar"},
     "invalid parameter \"foo=bar\"", 3},
    {{"api", "rate=10r/s"},
     "no \"key=\" is defined for ratelimit_zone \"api\"",
     -1},
    {{"api", "key=", "rate=10r/s"},
     "no \"key=\" is defined for ratelimit_zone \"api\"", -1},
    {{"api", "key=$a"},
     "ratelimit_zone \"api\" needs \"rate=\", or both \"limit=\" and "
     "\"window=\"", -1},
    {{"api", "key=$a", "limit=5"},
     "ratelimit_zone \"api\" needs \"rate=\", or both \"limit=\" and "
     "\"window=\"", -1},
    {{"api", "key=$a", "limit=0", "window=1s"}, "invalid limit \"0\"", -1},
    {{"api", "key=$a", "rate=10r/x"},
     "invalid rate \"10r/x\": use Nr/s, Nr/m, Nr/h or Nr/d with N > 0", -1},
    // names
    {{"a#b", "key=$a", "rate=1r/s"},
     "invalid zone name \"a#b\": use letters, digits, \"_\", \"-\" and "
     "\".\"", 0},
    {{"key=$a", "rate=1r/s"},
     "invalid zone name \"key=$a\": use letters, digits, \"_\", \"-\" and "
     "\".\"", 0},
    // the loop: unknown, another kind's, duplicate, before any value
    {{"api", "key=$a", "rate=1r/s", "key=$b"},
     "duplicate parameter \"key=$b\"", 3},
    {{"api", "key=$a", "rate=x", "rate=1r/s"},
     "duplicate parameter \"rate=1r/s\"", 3},
    {{"api", "key=$a", "rate=1r/s", "queue=1"},
     "invalid parameter \"queue=1\"", 3},
    {{"api", "key=$a", "rate=1r/s", "dry_run"},
     "invalid parameter \"dry_run\"", 3},
    {{"api", "rate=0r/s", "KEY=$a"}, "invalid parameter \"KEY=$a\"", 2},
    {{"api", "key=$a", "concurrency=1", "rate=1r/s"},
     "invalid parameter \"rate=1r/s\"", 3},
    {{"api", "key=$a", "concurrency=1", "concurrency=2"},
     "duplicate parameter \"concurrency=2\"", 3},
    // rate zones' values, in the order they are checked
    {{"api", "key=$a", "rate=1r/s", "limit=1"},
     "\"rate=\" cannot be combined with \"limit=\" or \"window=\"", -1},
    {{"api", "key=$a", "rate=1r/s", "window=1s"},
     "\"rate=\" cannot be combined with \"limit=\" or \"window=\"", -1},
    {{"api", "key=$a", "rate="},
     "invalid rate \"\": use Nr/s, Nr/m, Nr/h or Nr/d with N > 0", -1},
    {{"api", "key=$a", "limit=9007199254740993", "window=1s"},
     "invalid limit \"9007199254740993\"", -1},
    {{"api", "key=$a", "limit=x", "window=y"}, "invalid limit \"x\"", -1},
    {{"api", "key=$a", "limit=1", "window=0s"}, "invalid window \"0s\"", -1},
    {{"api", "key=$a", "limit=1", "window=1y"}, "invalid window \"1y\"", -1},
    {{"api", "key=$a", "rate=1r/s", "algorithm=leaky"},
     "invalid algorithm \"leaky\": use \"sliding\" or \"fixed\"", -1},
    {{"api", "key=$a", "rate=1r/s", "algorithm=Fixed"},
     "invalid algorithm \"Fixed\": use \"sliding\" or \"fixed\"", -1},
    {{"api", "key=$a", "rate=1r/s", "algorithm=fixed", "bucket=100ms"},
     "\"bucket=\" applies to sliding windows only", -1},
    {{"api", "key=$a", "rate=1r/s", "bucket=0ms"},
     "invalid bucket \"0ms\"", -1},
    {{"api", "key=$a", "rate=1r/s", "bucket=2s"},
     "bucket \"2s\" does not divide the window of 1000 ms into whole "
     "buckets", -1},
    {{"api", "rate=1r/s", "algorithm=x"},
     "invalid algorithm \"x\": use \"sliding\" or \"fixed\"", -1},
    // concurrency zones' values, in the order they are checked
    {{"api", "key=$a", "concurrency=0"}, "invalid concurrency \"0\"", -1},
    {{"api", "key=$a", "concurrency="}, "invalid concurrency \"\"", -1},
    {{"api", "key=$a", "concurrency=x", "queue=x"},
     "invalid concurrency \"x\"", -1},
    {{"api", "key=$a", "concurrency=1", "queue=-1"},
     "invalid queue \"-1\"", -1},
    {{"api", "key=$a", "concurrency=1", "queue=00"},
     "invalid queue \"00\"", -1},
    {{"api", "key=$a", "concurrency=1", "queue_timeout=0"},
     "invalid queue_timeout \"0\"", -1},
    {{"api", "key=$a", "concurrency=1", "lease=299ms"},
     "invalid lease \"299ms\": at least 300 ms", -1},
    {{"api", "key=$a", "concurrency=1", "lease=x"},
     "invalid lease \"x\": at least 300 ms", -1},
    {{"api", "concurrency=1"},
     "no \"key=\" is defined for ratelimit_zone \"api\"", -1},
};

TEST(ParseZoneParams, RefusesWithNginxText)
{
    for (const BadCase &c : kBadZones) {
        SCOPED_TRACE(joined(c.args));
        auto result = parse_zone_params(c.args);
        ASSERT_TRUE(result.error.has_value());
        EXPECT_EQ(result.error->text, c.text);
        std::size_t token = c.token < 0 ? c.args.size()
                                        : static_cast<std::size_t>(c.token);
        EXPECT_EQ(result.error->token, token);
    }
}

}  // namespace
}  // namespace ratelimit
