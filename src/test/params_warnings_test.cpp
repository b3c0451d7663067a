// The warnings of zones nginx -t accepts (params/zone_warnings.hpp), with
// the exact texts nginx prints, as parse_zone_params() gives them.
#include "params/zone_params.hpp"
#include "params/zone_warnings.hpp"

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

std::vector<std::string> warnings_of(const ParamTokens &tokens)
{
    auto result = parse_zone_params(tokens);
    EXPECT_FALSE(result.error.has_value());
    return result.params.warnings;
}

TEST(ZoneWarnings, BucketsAboveWhatRedisKeepsCompact)
{
    EXPECT_EQ(warnings_of({"z", "key=$k", "limit=1", "window=1h",
                           "bucket=1ms"}),
              std::vector<std::string>{
                  "bucket=1ms cuts the window into 3600000 buckets: a busy "
                  "subject's Redis key holds a field for each, compact up "
                  "to 512; use bucket=7200ms or longer"});
    // 7200ms is the shortest that gives at most 512: 500 of them.
    EXPECT_TRUE(warnings_of({"z", "key=$k", "limit=1", "window=1h",
                             "bucket=7200ms"}).empty());
    // 512 exactly, 513 not.
    EXPECT_TRUE(warnings_of({"z", "key=$k", "limit=1", "window=512ms",
                             "bucket=1ms"}).empty());
    EXPECT_EQ(warnings_of({"z", "key=$k", "limit=1", "window=513ms",
                           "bucket=1ms"}).size(), 1u);
    // A window of a prime number of ms has no shorter whole bucket.
    EXPECT_EQ(warnings_of({"z", "key=$k", "limit=1", "window=1031ms",
                           "bucket=1ms"}),
              std::vector<std::string>{
                  "bucket=1ms cuts the window into 1031 buckets: a busy "
                  "subject's Redis key holds a field for each, compact up "
                  "to 512; use bucket=1031ms or longer"});
    // The default buckets are never so many, whatever the window.
    EXPECT_TRUE(warnings_of({"z", "key=$k", "limit=1", "window=1w"})
                    .empty());
}

TEST(ZoneWarnings, WindowsOfMonths)
{
    EXPECT_EQ(warnings_of({"z", "key=$k", "limit=1", "window=400d"}),
              std::vector<std::string>{
                  "window=400d keeps each subject's Redis key until a "
                  "window after its last request: Redis holds every "
                  "subject seen in that time; keep windows to 31d or "
                  "less"});
    EXPECT_TRUE(warnings_of({"z", "key=$k", "limit=1", "window=31d"})
                    .empty());
    EXPECT_EQ(warnings_of({"z", "key=$k", "limit=1", "window=31d1ms",
                           "algorithm=gcra"}).size(), 1u);
    EXPECT_EQ(warnings_of({"z", "key=$k", "limit=$l", "window=5w",
                           "algorithm=fixed"}).size(), 1u);
    // Both at once, buckets first.
    auto both = warnings_of({"z", "key=$k", "limit=1", "window=40d",
                             "bucket=1h"});
    ASSERT_EQ(both.size(), 2u);
    EXPECT_EQ(both[0].substr(0, 10), "bucket=1h ");
    EXPECT_EQ(both[1].substr(0, 11), "window=40d ");
}

TEST(ZoneWarnings, NoneForConcurrencyZones)
{
    EXPECT_TRUE(warnings_of({"z", "key=$k", "concurrency=1", "queue=9",
                             "lease=24h"}).empty());
}

TEST(ZoneWarnings, LiteralKeyThatNamesAVariable)
{
    const KnownVariables known{{"remote_addr", "host", "my_plan"},
                               {"http_", "arg_", "cookie_"}};

    EXPECT_EQ(literal_key_warning("http_x_api_key", known),
              "key \"http_x_api_key\" is a literal: every request shares "
              "one counter; did you mean \"$http_x_api_key\"?");
    EXPECT_TRUE(literal_key_warning("remote_addr", known));
    EXPECT_TRUE(literal_key_warning("Remote_Addr", known));
    EXPECT_TRUE(literal_key_warning("arg_user", known));
    EXPECT_TRUE(literal_key_warning("my_plan", known));
    // Meant: no variable of that name, or not a name at all.
    EXPECT_FALSE(literal_key_warning("all", known));
    EXPECT_FALSE(literal_key_warning("service", known));
    EXPECT_FALSE(literal_key_warning("http_", known));
    EXPECT_FALSE(literal_key_warning("remote_addr2", known));
    EXPECT_FALSE(literal_key_warning("host:all", known));
    EXPECT_FALSE(literal_key_warning("arg_x-y", known));
    EXPECT_FALSE(literal_key_warning("", known));
}

TEST(ParamsWarnings, ClientValue)
{
    auto w = client_value_warning("cost", "$arg_max_tokens");
    ASSERT_TRUE(w);
    EXPECT_EQ(w->substr(0, 41), "cost=$arg_max_tokens takes a value the cl");
    EXPECT_TRUE(client_value_warning("limit", "$http_x_limit"));
    EXPECT_TRUE(client_value_warning("rate", "${cookie_plan}r/s"));
    EXPECT_TRUE(client_value_warning("cost", "1$arg_n"));
    EXPECT_FALSE(client_value_warning("cost", "$tokens"));
    EXPECT_FALSE(client_value_warning("limit", "$plan_limit"));
    EXPECT_FALSE(client_value_warning("limit", ""));
    EXPECT_FALSE(client_value_warning("cost", "$upstream_http_x_tokens"));
}

}  // namespace
}  // namespace ratelimit
