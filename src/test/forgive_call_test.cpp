#include "scripts/forgive_call.hpp"

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

constexpr std::string_view kKey = "rl:api:{0a1b2c3d}k y";
constexpr std::string_view kWakeKey = "0123456789abcdef0123456789abcdef01234567";

TEST(ForgiveCall, UnsignedWithoutWakeKey)
{
    std::string m = forgive_message(kKey, "");
    EXPECT_EQ(m, std::string("forgive - ") + std::string(kKey));
    EXPECT_EQ(forgiven_key(m, ""), kKey);
}

TEST(ForgiveCall, SignedTakenOnlyWithItsKey)
{
    std::string m = forgive_message(kKey, kWakeKey);
    EXPECT_EQ(m.size(), 8 + 40 + 1 + kKey.size());
    EXPECT_EQ(forgiven_key(m, kWakeKey), kKey);
    // A server without a secret takes it too.
    EXPECT_EQ(forgiven_key(m, ""), kKey);
    EXPECT_EQ(forgiven_key(m, "ffff"), "");
}

TEST(ForgiveCall, UnsignedOrForgedRefusedWithWakeKey)
{
    EXPECT_EQ(forgiven_key(forgive_message(kKey, ""), kWakeKey), "");

    std::string forged = forgive_message("rl:api:other", kWakeKey);
    std::string tail(" ");
    tail += kKey;
    forged = forged.substr(0, 8 + 40) + tail;
    EXPECT_EQ(forgiven_key(forged, kWakeKey), "");
}

TEST(ForgiveCall, MalformedRefused)
{
    for (std::string_view m : {"", "forgive", "forgive -", "forgive - ",
                               "forgave - k", "1a2b.3 1700000000"})
    {
        EXPECT_EQ(forgiven_key(m, ""), "") << m;
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

}  // namespace
}  // namespace ratelimit
