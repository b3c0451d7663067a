#include "limits/local_share.hpp"

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

TEST(LocalShare, RoundsUp)
{
    EXPECT_EQ(local_share(20, 2), 10u);
    EXPECT_EQ(local_share(20, 3), 7u);
    EXPECT_EQ(local_share(1, 5), 1u);
    EXPECT_EQ(local_share(20, 0), 20u);
    EXPECT_EQ(local_share(20, 1), 20u);
}

TEST(LocalShare, FixedWindowFillsAndResets)
{
    LocalCount count{0, 0, 0};
    const std::uint64_t end = 1700000010000;
    std::uint64_t now = 1700000003000;  // 7 s before its window's end

    for (int i = 0; i < 10; i++) {
        LocalStatus s = local_status(count, 10, end, now, 1);
        ASSERT_TRUE(s.fits);
        EXPECT_EQ(s.remaining, 9u - i);
        EXPECT_EQ(s.reset_ms, 7000u);
        local_add(&count, end, 1);
    }

    LocalStatus full = local_status(count, 10, end, now + 6999, 1);
    EXPECT_FALSE(full.fits);
    EXPECT_EQ(full.remaining, 0u);
    EXPECT_EQ(full.reset_ms, 1u);

    // The next window starts from nothing, however long it is (a calendar
    // zone's next period).
    LocalStatus next = local_status(count, 10, end + 3600000, now + 7000, 1);
    EXPECT_TRUE(next.fits);
    EXPECT_EQ(next.remaining, 9u);
    EXPECT_EQ(next.reset_ms, 3600000u);
    local_add(&count, end + 3600000, 1);
    EXPECT_EQ(count.used, 1u);
}

TEST(LocalShare, CostsCount)
{
    LocalCount count{0, 0, 0};

    EXPECT_TRUE(local_status(count, 10, 1000, 500, 10).fits);
    EXPECT_FALSE(local_status(count, 10, 1000, 500, 11).fits);
    local_add(&count, 1000, 7);

    LocalStatus s = local_status(count, 10, 1000, 600, 4);
    EXPECT_FALSE(s.fits);
    EXPECT_EQ(s.remaining, 3u);
    EXPECT_TRUE(local_status(count, 10, 1000, 600, 0).fits);
}

// A share used up, by the last unit or by a refusal, is full until its
// window ends; one with units left is not.
TEST(LocalShare, FullUntilTheWindowEnds)
{
    LocalCount count{0, 0, 0};
    std::uint64_t now = 12000;

    LocalStatus s = local_status(count, 3, 20000, now, 2);
    local_add(&count, 20000, 2);
    local_note_full(&count, s, now);
    EXPECT_FALSE(local_full(count, now));

    s = local_status(count, 3, 20000, now + 1, 1);
    local_add(&count, 20000, 1);
    local_note_full(&count, s, now + 1);
    EXPECT_TRUE(local_full(count, now + 1));
    EXPECT_TRUE(local_full(count, 19999));
    EXPECT_FALSE(local_full(count, 20000));

    LocalCount refused{20000, 1, 0};
    s = local_status(refused, 3, 20000, 15000, 5);
    local_note_full(&refused, s, 15000);
    EXPECT_FALSE(s.fits);
    EXPECT_TRUE(local_full(refused, 19999));
    EXPECT_FALSE(local_full(refused, 20000));
}

// A subject's override, as this server heard it from Redis, is its limit
// while it is in force: to its end, or for ever; none is the zone's.
TEST(LocalShare, OverrideWhileInForce)
{
    LocalCount count{};
    EXPECT_EQ(local_limit(count, 20, 1000), 20u);

    count.override_limit = 4 + 1;
    EXPECT_EQ(local_limit(count, 20, 1000), 4u);

    count.override_end_ms = 2000;
    EXPECT_EQ(local_limit(count, 20, 1999), 4u);
    EXPECT_EQ(local_limit(count, 20, 2000), 20u);

    count.override_limit = 0 + 1;
    count.override_end_ms = 0;
    EXPECT_EQ(local_limit(count, 20, 5000), 0u);
    EXPECT_EQ(local_share(local_limit(count, 20, 5000), 2), 0u);
}

}  // namespace
}  // namespace ratelimit
