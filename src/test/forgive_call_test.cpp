#include "scripts/forgive_call.hpp"

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

constexpr std::string_view kKey = "rl:api:{0a1b2c3d}k y";
constexpr std::string_view kWakeKey = "0123456789abcdef0123456789abcdef01234567";

constexpr std::uint64_t kNow = 1795000000123;

TEST(ForgiveCall, UnsignedWithoutWakeKey)
{
    std::string m = forgive_message(kKey, "", kNow);
    EXPECT_EQ(m, "forgive - 1795000000123 " + std::string(kKey));
    EXPECT_EQ(forgiven_key(m, "", kNow), kKey);
}

TEST(ForgiveCall, SignedTakenOnlyWithItsKey)
{
    std::string m = forgive_message(kKey, kWakeKey, kNow);
    EXPECT_EQ(m.size(), 8 + 40 + 1 + 13 + 1 + kKey.size());
    EXPECT_EQ(forgiven_key(m, kWakeKey, kNow), kKey);
    // A server without a secret takes it too.
    EXPECT_EQ(forgiven_key(m, "", kNow), kKey);
    EXPECT_EQ(forgiven_key(m, "ffff", kNow), "");
}

TEST(ForgiveCall, UnsignedOrForgedRefusedWithWakeKey)
{
    EXPECT_EQ(forgiven_key(forgive_message(kKey, "", kNow), kWakeKey, kNow),
              "");

    std::string forged = forgive_message("rl:api:other", kWakeKey, kNow);
    std::string tail(" 1795000000123 ");
    tail += kKey;
    forged = forged.substr(0, 8 + 40) + tail;
    EXPECT_EQ(forgiven_key(forged, kWakeKey, kNow), "");

    // The stamp is signed: moving it forward makes it another message.
    std::string moved = forgive_message(kKey, kWakeKey, kNow);
    moved.replace(8 + 40 + 1, 13, "1795000060123");
    EXPECT_EQ(forgiven_key(moved, kWakeKey, kNow + 60000), "");
}

// A captured message published again later is refused; within the
// freshness both ways (clocks of two servers) it is taken.
TEST(ForgiveCall, ReplayedLaterRefused)
{
    std::string m = forgive_message(kKey, kWakeKey, kNow);
    EXPECT_EQ(forgiven_key(m, kWakeKey, kNow + kForgiveFreshMs), kKey);
    EXPECT_EQ(forgiven_key(m, kWakeKey, kNow - kForgiveFreshMs), kKey);
    EXPECT_EQ(forgiven_key(m, kWakeKey, kNow + kForgiveFreshMs + 1), "");
    EXPECT_EQ(forgiven_key(m, kWakeKey, kNow - kForgiveFreshMs - 1), "");
}

TEST(ForgiveCall, MalformedRefused)
{
    for (std::string_view m : {"", "forgive", "forgive -", "forgive - ",
                               "forgave - 1 k", "1a2b.3 1700000000",
                               "forgive - k", "forgive - 12x k",
                               "forgive - 1 ", "forgive -  k",
                               "forgive - 12345678901234567890 k"})
    {
        EXPECT_EQ(forgiven_key(m, "", kNow), "") << m;
    }
}

TEST(ForgiveCall, OneEvalOfOneKey)
{
    std::string c = format_forgive_call(kKey, "rl:wake:forgive", "forgive - x");
    EXPECT_EQ(c.substr(0, 14), "*6\r\n$4\r\nEVAL\r\n");
    EXPECT_NE(c.find("\r\n$1\r\n1\r\n"), std::string::npos);
    EXPECT_NE(c.find(std::string(kKey)), std::string::npos);
    EXPECT_NE(c.find("rl:wake:forgive"), std::string::npos);
}

// With a side key and a marker (a zone that bans): three keys, the count
// key first, so that the call goes to its node.
TEST(ForgiveCall, LiftsABanWithItsSideKey)
{
    std::string c = format_forgive_call(kKey, "rl:wake:forgive",
                                        "forgive - x", "rl:a+:u", "rl:a+");
    EXPECT_EQ(c.substr(0, 14), "*8\r\n$4\r\nEVAL\r\n");
    std::size_t keys = c.find("\r\n$1\r\n3\r\n");
    std::size_t key = c.find(std::string(kKey));
    std::size_t side = c.find("\r\nrl:a+:u\r\n");
    std::size_t marker = c.find("\r\nrl:a+\r\n");
    ASSERT_NE(keys, std::string::npos);
    EXPECT_LT(keys, key);
    EXPECT_LT(key, side);
    EXPECT_LT(side, marker);
    EXPECT_LT(marker, c.find("rl:wake:forgive"));
}

}  // namespace
}  // namespace ratelimit
