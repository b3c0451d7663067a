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
    EXPECT_TRUE(r.params.packed);
}

// New window keys: packed strings, unless `layout=hash` (which the release
// before reads too).
TEST(ParseRedisParams, Layout)
{
    auto r = parse_redis_params({"a:1", "layout=hash"});
    ASSERT_FALSE(r.error.has_value()) << r.error->text;
    EXPECT_FALSE(r.params.packed);

    r = parse_redis_params({"a:1", "layout=packed"});
    ASSERT_FALSE(r.error.has_value()) << r.error->text;
    EXPECT_TRUE(r.params.packed);

    for (const char *bad : {"layout=Hash", "layout=", "layout=string"}) {
        r = parse_redis_params({"a:1", bad});
        ASSERT_TRUE(r.error.has_value()) << bad;
        EXPECT_EQ(r.error->text, std::string("invalid parameter \"") + bad
                                     + "\"");
    }

    r = parse_redis_params({"a:1", "layout=hash", "layout=packed"});
    ASSERT_TRUE(r.error.has_value());
    EXPECT_EQ(r.error->text, "duplicate parameter \"layout=packed\"");
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
                            "user=u", "password_file=f",
                            "fleet_secret_file=/etc/fleet"});
    ASSERT_FALSE(r.error.has_value()) << r.error->text;
    EXPECT_TRUE(r.params.cluster);
    EXPECT_TRUE(r.params.cross_slot);
    EXPECT_EQ(r.params.fleet_secret_file, "/etc/fleet");
    EXPECT_EQ(r.params.addresses.size(), 2u);
    EXPECT_EQ(r.params.addresses[0].token, 1u);
}

TEST(ParseRedisParams, ClusterOnlyFirst)
{
    // Elsewhere "cluster" is an address, and one too many.
    auto r = parse_redis_params({"a:1", "cluster"});
    ASSERT_TRUE(r.error.has_value());
    EXPECT_EQ(r.params.addresses.size(), 2u);

    // Where several addresses are taken, it is one: a sentinel's host.
    r = parse_redis_params({"a:26379", "cluster", "sentinel=m"});
    EXPECT_FALSE(r.error.has_value());
    EXPECT_EQ(r.params.addresses.size(), 2u);
}

// The first line, without its line end, up to 16384 bytes: what Redis
// takes in AUTH from a client not yet authenticated.  nginx read 1023
// bytes of it before, and cut a longer one silently.
TEST(PasswordFileLine, FirstLineUpToTheLargestPassword)
{
    EXPECT_EQ(password_file_line("pw\nsecond\n").password, "pw");
    EXPECT_EQ(password_file_line("pw\r\nsecond").password, "pw");
    EXPECT_EQ(password_file_line("pw").password, "pw");
    EXPECT_EQ(password_file_line("p w\tx\n").password, "p w\tx");
    EXPECT_EQ(password_file_line(std::string("p\0w\n", 4)).password,
              std::string("p\0w", 3));
    EXPECT_EQ(password_file_line("\npw\n").password, "");
    EXPECT_EQ(password_file_line("").password, "");
    EXPECT_FALSE(password_file_line("").too_long);

    std::string longest(kMaxPasswordSize, 'x');
    EXPECT_EQ(kMaxPasswordSize, 16384u);
    EXPECT_EQ(password_file_line(longest).password, longest);
    EXPECT_EQ(password_file_line(longest + "\n").password, longest);
    EXPECT_EQ(password_file_line(std::string(2000, 'y') + "\n").password,
              std::string(2000, 'y'));

    PasswordLine over = password_file_line(longest + "x");
    EXPECT_TRUE(over.too_long);
    EXPECT_EQ(over.password, "");
    EXPECT_FALSE(password_file_line(longest + "\r").too_long);
}

}  // namespace
}  // namespace ratelimit
