// A side key's value read as the script reads it (zones/side_value.hpp):
// the first part of the exact form "o=L,W,X" is the override, in force
// inside its bounds until it lapses; and a zone as an override applies it.
#include <gtest/gtest.h>

#include <string>

#include "zones/side_value.hpp"

namespace ratelimit::test {

namespace {

using namespace std::literals;

constexpr double kNow = 1700000000000;

// The override of `value` at kNow as (in force, L, W, X).
std::vector<double> read(const std::string &value)
{
    Override o = read_override(value, kNow);
    return {o.in_force ? 1.0 : 0.0, o.limit, o.window_ms, o.lapse_ms};
}

using V = std::vector<double>;
const V kNone{0, 0, 0, 0};

TEST(SideValue, TheOverridePart)
{
    EXPECT_EQ(read("o=5,60000,0"), (V{1, 5, 60000, 0}));
    EXPECT_EQ(read("o=05,060000,00"), (V{1, 5, 60000, 0}));
    EXPECT_EQ(read("o=0,1,0"), (V{1, 0, 1, 0}));
    EXPECT_EQ(read("b=1;o=5,60000,0;"), (V{1, 5, 60000, 0}));
    EXPECT_EQ(read(";o=5,60000,0"), (V{1, 5, 60000, 0}));
}

// X = 0 never lapses; else it is in force while X > now.
TEST(SideValue, LapsesAtItsTime)
{
    std::string now = std::to_string(static_cast<long long>(kNow));
    std::string next = std::to_string(static_cast<long long>(kNow) + 1);
    EXPECT_EQ(read("o=5,60000," + next), (V{1, 5, 60000, kNow + 1}));
    EXPECT_EQ(read("o=5,60000," + now), kNone);
    EXPECT_EQ(read("o=5,60000,1"), kNone);
}

// The first part of the form, whatever it holds: none is looked for
// after it.
TEST(SideValue, TheFirstPartOfTheFormOnly)
{
    EXPECT_EQ(read("x=1;o=x;o=5,60000,0"), (V{1, 5, 60000, 0}));
    EXPECT_EQ(read("o=5,60000,99999999999999999999;o=7,1,0"), kNone);
    EXPECT_EQ(read("o=5,0,0;o=7,1,0"), kNone);
}

TEST(SideValue, NotOfTheFormIsNone)
{
    for (const char *value :
         {"", "o=x", "o=5,60000", "o=5,60000,0,1", "o=-5,1,0", "o= 5,1,0",
          "O=5,1,0", "o=5,1,0 ", "o=5;1,0", "o:5,1,0", "o=5.0,1,0",
          "o=0x5,1,0", "o=5,1,1e3", "5,1,0", ";;"})
    {
        EXPECT_EQ(read(value), kNone) << value;
    }

    EXPECT_EQ(read(std::string("o=5,1,0\0", 8)), kNone);
}

TEST(SideValue, Bounds)
{
    EXPECT_EQ(read("o=9007199254740992,604800000000000,9007199254740992"),
              (V{1, 9007199254740992.0, 604800000000000, 9007199254740992.0}));
    EXPECT_EQ(read("o=9007199254740994,1,0"), kNone);
    EXPECT_EQ(read("o=5,604800000000001,0"), kNone);
    EXPECT_EQ(read("o=5,1,9007199254740994"), kNone);
    EXPECT_EQ(read("o=1" + std::string(400, '0') + ",1,0"), kNone);
    EXPECT_EQ(read("o=1,1" + std::string(24, '0') + ",0"), kNone);
}

ZoneParams zone(double limit, double bucket_ms, bool gcra)
{
    ZoneParams made{};
    made.limit = limit;
    made.bucket_ms = bucket_ms;
    made.span = 3;
    made.gcra = gcra ? bucket_ms * 1000 / limit : 0;
    return made;
}

TEST(SideValue, AZoneUnderAnOverride)
{
    ZoneParams window = overridden(zone(10, 1000, false),
                                   Override{true, 7, 5000, 0});
    EXPECT_EQ(window.limit, 7);
    EXPECT_EQ(window.gcra, 0);
    EXPECT_EQ(overridden(zone(10, 1000, false), Override{true, 0, 1, 0})
                  .limit,
              0);

    ZoneParams gcra = overridden(zone(10, 1000, true),
                                 Override{true, 4, 2000, 0});
    EXPECT_EQ(gcra.gcra, 500000);
    EXPECT_EQ(gcra.span, 3);
    EXPECT_EQ(gcra.limit, 4);

    // Limit 0: its own interval kept for settles (over() refuses all).
    gcra = overridden(zone(10, 1000, true), Override{true, 0, 2000, 0});
    EXPECT_EQ(gcra.gcra, 100000);
    EXPECT_EQ(gcra.limit, 0);
}

// The base, then the count key from the base's last byte on: the zone
// name's end marked, whatever follows it.
TEST(SideValue, TheSideKeyOfACountKey)
{
    EXPECT_EQ(side_key("rl:api+", "rl:api:u"), "rl:api+:u");
    EXPECT_EQ(side_key("rl:z+", "rl:z#abc"), "rl:z+#abc");
    EXPECT_EQ(side_key("rl:z+", "rl:z:{0a1b2c3d}u"), "rl:z+:{0a1b2c3d}u");
    EXPECT_EQ(side_key("{t}:z+", "{t}:z:\0\xff"s), "{t}:z+:\0\xff"s);

    // Shorter than the base: the base alone (string.sub past the end).
    EXPECT_EQ(side_key("rl:z+", "rl:z"), "rl:z+");
    EXPECT_EQ(side_key("rl:z+", "r"), "rl:z+");
}

}  // namespace

}  // namespace ratelimit::test
