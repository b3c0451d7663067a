#include "params/redis_params.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

TEST(ParseRedisParams, Defaults)
{
    auto r = parse_redis_params({"127.0.0.1:6379"});
    ASSERT_FALSE(r.error.has_value());
    ASSERT_EQ(r.params.addresses.size(), 1u);
    EXPECT_EQ(r.params.addresses[0].text, "127.0.0.1:6379");
    EXPECT_EQ(r.params.db, 0);
    EXPECT_EQ(r.params.timeout_ms, 50u);
    EXPECT_EQ(r.params.connect_timeout_ms, 1000u);
    EXPECT_FALSE(r.params.cluster);
    EXPECT_TRUE(r.params.password.empty());
}

TEST(ParseRedisParams, EveryParameter)
{
    auto r = parse_redis_params({"a:1", "db=2", "user=rluser",
                                 "password=secret", "timeout=100ms",
                                 "connect_timeout=1s"});
    ASSERT_FALSE(r.error.has_value()) << r.error->text;
    EXPECT_EQ(r.params.db, 2);
    EXPECT_EQ(r.params.user, "rluser");
    EXPECT_EQ(r.params.password, "secret");
    EXPECT_EQ(r.params.timeout_ms, 100u);
    EXPECT_EQ(r.params.connect_timeout_ms, 1000u);

    r = parse_redis_params({"s1:1", "s2:2", "localhost:3",
                            "sentinel=mymaster", "db=3", "user=u",
                            "password=p", "sentinel_user=su",
                            "sentinel_password=sp"});
    ASSERT_FALSE(r.error.has_value()) << r.error->text;
    ASSERT_EQ(r.params.addresses.size(), 3u);
    EXPECT_EQ(r.params.addresses[2].text, "localhost:3");
    EXPECT_EQ(r.params.addresses[2].token, 2u);
    EXPECT_EQ(r.params.sentinel_master, "mymaster");
    EXPECT_EQ(r.params.sentinel_user, "su");
    EXPECT_EQ(r.params.sentinel_password, "sp");

    r = parse_redis_params({"unix:/tmp/r.sock", "password_file=/etc/pw",
                            "db=0"});
    ASSERT_FALSE(r.error.has_value()) << r.error->text;
    EXPECT_EQ(r.params.password_file, "/etc/pw");
    EXPECT_EQ(r.params.addresses[0].text, "unix:/tmp/r.sock");

    r = parse_redis_params({"cluster", "n1:1", "n2:2", "cross_slot",
                            "user=u", "password_file=f"});
    ASSERT_FALSE(r.error.has_value()) << r.error->text;
    EXPECT_TRUE(r.params.cluster);
    EXPECT_TRUE(r.params.cross_slot);
    EXPECT_EQ(r.params.addresses.size(), 2u);
    EXPECT_EQ(r.params.addresses[0].token, 1u);
}

TEST(ParseRedisParams, ClusterOnlyFirst)
{
    // Elsewhere "cluster" is an address, and one too many.
    auto r = parse_redis_params({"a:1", "cluster"});
    ASSERT_TRUE(r.error.has_value());
    EXPECT_EQ(r.params.addresses.size(), 2u);
}

struct BadCase {
    ParamTokens args;
    const char *text;
    int token;  // -1: the directive as a whole
};

const BadCase kBadRedis[] = {
    // t/00-config.t, t/28-redis-config.t
    {{"127.0.0.1:1", "foo=bar"}, "invalid parameter \"foo=bar\"", 1},
    {{"127.0.0.1:1", "sentinel_user=su", "sentinel_password=sp"},
     "\"sentinel_user=\" and \"sentinel_password=\" require \"sentinel=\"",
     -1},
    {{"127.0.0.1:1", "127.0.0.1:2"},
     "ratelimit_redis takes one address, the addresses of sentinels with "
     "\"sentinel=\", or seed nodes after \"cluster\"", -1},
    // values, checked as read
    {{"a:1", "db=-1"}, "invalid parameter \"db=-1\"", 1},
    {{"a:1", "db="}, "invalid parameter \"db=\"", 1},
    {{"a:1", "db=9223372036854775808"},
     "invalid parameter \"db=9223372036854775808\"", 1},
    {{"a:1", "db=1", "db=2"}, "duplicate parameter \"db=2\"", 2},
    {{"a:1", "db=x", "db=2"}, "invalid parameter \"db=x\"", 1},
    {{"a:1", "user="}, "invalid parameter \"user=\"", 1},
    {{"a:1", "password="}, "invalid parameter \"password=\"", 1},
    {{"a:1", "password_file="}, "invalid parameter \"password_file=\"", 1},
    {{"a:1", "sentinel="}, "invalid parameter \"sentinel=\"", 1},
    {{"a:1", "sentinel_user="}, "invalid parameter \"sentinel_user=\"", 1},
    {{"a:1", "sentinel_password="}, "invalid parameter \"sentinel_password=\"",
     1},
    {{"a:1", "password=a", "password=a"},
     "duplicate parameter \"password=a\"", 2},
    {{"a:1", "timeout=0"}, "invalid parameter \"timeout=0\"", 1},
    {{"a:1", "timeout=1x"}, "invalid parameter \"timeout=1x\"", 1},
    {{"a:1", "timeout=1s", "timeout=x"},
     "duplicate parameter \"timeout=x\"", 2},
    {{"a:1", "connect_timeout=-1s"},
     "invalid parameter \"connect_timeout=-1s\"", 1},
    {{"a:1", "Timeout=1s"}, "invalid parameter \"Timeout=1s\"", 1},
    {{"a:1", "cross_slot"}, "\"cross_slot\" requires \"cluster\"", 1},
    {{"cluster", "a:1", "cross_slot", "cross_slot"},
     "duplicate parameter \"cross_slot\"", 3},
    // combinations, once all is read
    {{}, "ratelimit_redis needs an address", -1},
    {{"db=1"}, "ratelimit_redis needs an address", -1},
    {{"cluster"}, "ratelimit_redis cluster needs the address of a seed node",
     -1},
    {{"cluster", "a:1", "db=0"},
     "\"cluster\" cannot be combined with \"sentinel=\" or \"db=\": a "
     "cluster has one database and no sentinels", -1},
    {{"cluster", "a:1", "sentinel=m"},
     "\"cluster\" cannot be combined with \"sentinel=\" or \"db=\": a "
     "cluster has one database and no sentinels", -1},
    {{"a:1", "sentinel=m", "sentinel_user=u"},
     "\"sentinel_user=\" requires \"sentinel_password=\"", -1},
    {{"a:1", "password=p", "password_file=f"},
     "\"password=\" and \"password_file=\" cannot be combined", -1},
    {{"a:1", "user=u"},
     "\"user=\" requires \"password=\" or \"password_file=\"",
     -1},
};

TEST(ParseRedisParams, RefusesWithNginxText)
{
    for (const BadCase &c : kBadRedis) {
        SCOPED_TRACE(c.text);
        auto r = parse_redis_params(c.args);
        ASSERT_TRUE(r.error.has_value());
        EXPECT_EQ(r.error->text, c.text);
        std::size_t token = c.token < 0 ? c.args.size()
                                        : static_cast<std::size_t>(c.token);
        EXPECT_EQ(r.error->token, token);
    }
}

}  // namespace
}  // namespace ratelimit
