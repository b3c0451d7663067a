// The packed string's bytes (zones/packed_window.hpp): written exactly as
// the layout says, read back, and a string of another shape refused.
#include <gtest/gtest.h>

#include <string>

#include "test/packed_bytes.hpp"
#include "zones/packed_window.hpp"

namespace ratelimit::test {

namespace {

constexpr double kBase = 29464000000.0;  // a bucket number as large as today's

TEST(PackedWindowTest, SlidingBytesAreTheLayouts)
{
    PackedWindow w;
    w.buckets = {{kBase, 3}, {kBase + 2, 1}};
    w.total = 4;
    std::string out;
    packed_write(&w, false, &out);
    EXPECT_EQ(out, le(1, 1) + le(29464000000, 8) + le(0, 2) + le(3, 1)
                       + le(2, 2) + le(1, 1) + le(4, 8));
    EXPECT_EQ(packed_newest_at(w, false), out.size() - 8 - 1);

    PackedWindow back;
    ASSERT_TRUE(packed_read(out, false, &back));
    EXPECT_EQ(back.width, 1u);
    EXPECT_EQ(back.base, kBase);
    EXPECT_EQ(back.oldest(), kBase);
    EXPECT_EQ(back.newest(), kBase + 2);
    EXPECT_EQ(back.buckets[0].count, 3);
    EXPECT_EQ(back.total, 4);
}

TEST(PackedWindowTest, FixedIsTheWindowAndItsCount)
{
    PackedWindow w;
    w.buckets = {{491066, 7}};
    w.total = 7;
    std::string out;
    packed_write(&w, true, &out);
    EXPECT_EQ(out, le(491066, 8) + le(7, 8));
    EXPECT_EQ(packed_newest_at(w, true), 8u);
}

// The smallest width holding every count, and never narrower than read.
TEST(PackedWindowTest, WidthGrowsAndNeverNarrows)
{
    EXPECT_EQ(packed_width(255), 1u);
    EXPECT_EQ(packed_width(256), 2u);
    EXPECT_EQ(packed_width(65536), 4u);
    EXPECT_EQ(packed_width(4294967296.0), 8u);
    EXPECT_EQ(packed_width(9007199254740992.0), 8u);

    PackedWindow w;
    w.buckets = {{kBase, 300}, {kBase + 1, 1}};
    w.total = 301;
    std::string out;
    packed_write(&w, false, &out);
    EXPECT_EQ(out[0], 2);
    w.buckets.erase(w.buckets.begin());
    w.total = 1;
    packed_write(&w, false, &out);
    EXPECT_EQ(out, le(2, 1) + le(29464000000, 8) + le(1, 2) + le(1, 2)
                       + le(1, 8));
}

// A bucket older than the base, or 65,536 or more past it, makes the
// oldest bucket the base.
TEST(PackedWindowTest, BaseMovesToTheOldest)
{
    PackedWindow w;
    w.base = kBase;
    w.buckets = {{kBase - 3, 1}, {kBase, 1}};
    w.total = 2;
    std::string out;
    packed_write(&w, false, &out);
    EXPECT_EQ(w.base, kBase - 3);

    w.buckets = {{kBase + 70000, 1}, {kBase + 70001, 1}};
    packed_write(&w, false, &out);
    EXPECT_EQ(w.base, kBase + 70000);
    w.buckets = {{kBase + 70000, 1}, {kBase + 70000 + 65535, 1}};
    packed_write(&w, false, &out);
    EXPECT_EQ(w.base, kBase + 70000);
}

TEST(PackedWindowTest, AnotherShapeIsNone)
{
    PackedWindow w;
    std::string one = le(1, 1) + le(5, 8) + le(0, 2) + le(1, 1) + le(1, 8);
    EXPECT_TRUE(packed_read(one, false, &w));
    EXPECT_FALSE(packed_read(one.substr(0, one.size() - 1), false, &w));
    EXPECT_FALSE(packed_read(one + "x", false, &w));
    EXPECT_FALSE(packed_read(le(3, 1) + one.substr(1), false, &w));
    EXPECT_FALSE(packed_read(le(1, 1) + le(5, 8) + le(1, 8), false, &w));
    EXPECT_FALSE(packed_read("12", false, &w));
    EXPECT_FALSE(packed_read(one, true, &w));
    EXPECT_TRUE(packed_read(le(1, 8) + le(1, 8), true, &w));
    EXPECT_FALSE(packed_read("1234567890123456x", true, &w));
}

}  // namespace

}  // namespace ratelimit::test
