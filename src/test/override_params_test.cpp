#include "params/override_params.hpp"

#include <string>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

const Policy kWindow{100, 60000, 1000, Algorithm::kSliding, 0};
const Policy kGcra{10, 1000, 1000, Algorithm::kGcra, 4};

std::string error_of(const Policy &policy, const OverrideParams &params)
{
    const char *error = nullptr;
    EXPECT_FALSE(parse_override(policy, params, &error).has_value());
    return error != nullptr ? error : "";
}

TEST(OverrideParams, WindowZoneTakesALimit)
{
    const char *error = nullptr;
    auto c = parse_override(kWindow, {"250", {}, {}}, &error);
    ASSERT_TRUE(c.has_value());
    EXPECT_FALSE(c->remove);
    EXPECT_EQ(c->limit, 250u);
    EXPECT_EQ(c->window_ms, 60000u);
    EXPECT_EQ(c->ttl_ms, 0u);

    c = parse_override(kWindow, {"0", {}, "86400"}, &error);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->limit, 0u);
    EXPECT_EQ(c->ttl_ms, 86400000u);

    c = parse_override(kWindow, {"9007199254740992", {}, "2147483647"},
                       &error);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->limit, 9007199254740992u);
    EXPECT_EQ(c->ttl_ms, 2147483647000u);

    c = parse_override(kWindow, {"default", {}, {}}, &error);
    ASSERT_TRUE(c.has_value());
    EXPECT_TRUE(c->remove);
}

TEST(OverrideParams, GcraZoneTakesARate)
{
    const char *error = nullptr;
    auto c = parse_override(kGcra, {{}, "10r/m", "60"}, &error);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->limit, 10u);
    EXPECT_EQ(c->window_ms, 60000u);
    EXPECT_EQ(c->ttl_ms, 60000u);

    c = parse_override(kGcra, {{}, "0r/s", {}}, &error);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->limit, 0u);
    EXPECT_EQ(c->window_ms, 1000u);

    c = parse_override(kGcra, {"default", {}, {}}, &error);
    ASSERT_TRUE(c.has_value());
    EXPECT_TRUE(c->remove);
}

// Every 400 reason, one line each.
TEST(OverrideParams, Reasons)
{
    EXPECT_EQ(error_of(kWindow, {}),
              "missing limit: use limit=N, or limit=default to remove");
    EXPECT_EQ(error_of(kWindow, {{}, {}, "60"}),
              "missing limit: use limit=N, or limit=default to remove");
    EXPECT_EQ(error_of(kWindow, {{}, "10r/s", {}}),
              "this zone counts requests per window: give limit=N");
    EXPECT_EQ(error_of(kGcra, {"10", {}, {}}),
              "a GCRA zone takes a rate: give rate=Nr/s or Nr/m");
    for (const char *bad : {"", "-1", "1.5", "ten", "9007199254740993",
                            " 1", "1 ", "0x10"}) {
        SCOPED_TRACE(bad);
        EXPECT_EQ(error_of(kWindow, {bad, {}, {}}),
                  "limit must be a whole number from 0 to 2^53, or default");
    }
    for (const char *bad : {"", "10", "10r/w", "r/s", "-1r/s", "1.5r/s"}) {
        SCOPED_TRACE(bad);
        EXPECT_EQ(error_of(kGcra, {{}, bad, {}}),
                  "rate must be Nr/s, Nr/m, Nr/h or Nr/d");
    }
    for (const char *bad : {"", "0", "-5", "1.5", "2147483648", "1s"}) {
        SCOPED_TRACE(bad);
        EXPECT_EQ(error_of(kWindow, {"5", {}, bad}),
                  "ttl must be whole seconds from 1");
    }
    // 1 + 10^7 turns of a day each: past the longest window (a million
    // weeks).
    Policy deep = kGcra;
    deep.burst = 10000000;
    EXPECT_EQ(error_of(deep, {{}, "1r/d", {}}),
              "rate too slow for the zone's burst: give a faster one");
}

}  // namespace
}  // namespace ratelimit
