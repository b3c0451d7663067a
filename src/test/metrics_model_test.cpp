#include "report/metrics_model.hpp"

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

TEST(MetricsModel, BucketIndexIsTheFirstBoundNotBelow)
{
    const std::uint64_t *b = kDurationBoundsUs;

    EXPECT_EQ(bucket_index(b, kDurationBounds, 0), 0u);
    EXPECT_EQ(bucket_index(b, kDurationBounds, 100), 0u);
    EXPECT_EQ(bucket_index(b, kDurationBounds, 101), 1u);
    EXPECT_EQ(bucket_index(b, kDurationBounds, 1000000), kDurationBounds - 1);
    EXPECT_EQ(bucket_index(b, kDurationBounds, 1000001), kDurationBounds);
    EXPECT_EQ(bucket_index(kBatchBoundsCount, kBatchBounds, 16), 4u);
    EXPECT_EQ(bucket_index(kBatchBoundsCount, kBatchBounds, 3), 2u);
}

TEST(MetricsModel, RowsDoNotShareCacheLines)
{
    MetricsLayout layout(3, 4);
    std::vector<char> block(layout.size());
    void *base = block.data();

    for (std::size_t s = 0; s < 4; s++) {
        auto at = reinterpret_cast<char *>(layout.link(base, s)) - block.data();
        EXPECT_EQ(at % MetricsLayout::kCacheLine, 0u);
        EXPECT_GE(at, static_cast<long>(3 * sizeof(std::uint64_t)));
        auto end = reinterpret_cast<char *>(layout.zone(base, s, 2) + 1)
                   - block.data();
        EXPECT_LE(static_cast<std::size_t>(end), layout.size());
        if (s + 1 < 4) {
            EXPECT_LE(end, reinterpret_cast<char *>(layout.link(base, s + 1))
                               - block.data());
        }
    }
}

TEST(MetricsModel, SignatureFollowsNamesOrderAndRows)
{
    std::string_view ab[] = {"a", "b"}, ba[] = {"b", "a"}, a_b[] = {"ab", ""};

    EXPECT_EQ(layout_signature(ab, 2, 2), layout_signature(ab, 2, 2));
    EXPECT_NE(layout_signature(ab, 2, 2), layout_signature(ba, 2, 2));
    EXPECT_NE(layout_signature(ab, 2, 2), layout_signature(ab, 2, 3));
    EXPECT_NE(layout_signature(ab, 2, 2), layout_signature(a_b, 2, 2));
    EXPECT_NE(layout_signature(ab, 2, 2), layout_signature(ab, 1, 2));
}

std::uint64_t busy(const std::uint64_t &word, const std::uint64_t &closed,
                   std::uint64_t now)
{
    return busy_clock::read(&word, now, [&] { return closed; });
}

TEST(MetricsModel, BusyClockCountsTheUnionOfWorkersIntervals)
{
    std::uint64_t word = 0, closed = 0;

    EXPECT_EQ(busy(word, closed, 1000), 0u);
    busy_clock::enter(&word, 0, 1000);
    EXPECT_EQ(busy(word, closed, 1040), 40u);
    busy_clock::enter(&word, 1, 1050);   // overlaps: no new interval
    busy_clock::leave(&word, 0, 1100, &closed);
    EXPECT_EQ(closed, 0u);
    EXPECT_EQ(busy(word, closed, 1150), 150u);
    busy_clock::leave(&word, 1, 1200, &closed);
    EXPECT_EQ(closed, 200u);
    EXPECT_EQ(busy(word, closed, 5000), 200u);  // idle time is not busy
    busy_clock::enter(&word, 1, 6000);
    busy_clock::leave(&word, 1, 6010, &closed);
    EXPECT_EQ(busy(word, closed, 7000), 210u);
}

TEST(MetricsModel, BusyClockIgnoresARowsSecondProcess)
{
    std::uint64_t word = 0, closed = 0;

    // A reload's old and new worker 0: the first entry counts, the second
    // leaves nothing to close, the mask empties once.
    busy_clock::enter(&word, 0, 100);
    busy_clock::enter(&word, 0, 110);
    busy_clock::leave(&word, 0, 150, &closed);
    busy_clock::leave(&word, 0, 170, &closed);
    EXPECT_EQ(closed, 50u);
    EXPECT_EQ(busy(word, closed, 1000), 50u);
}

TEST(MetricsModel, BusyClockReadIsOpenIntervalPlusClosed)
{
    std::uint64_t word = 0, closed = 500;

    busy_clock::enter(&word, 20, 1000);  // row 20 shares bit 5
    EXPECT_EQ(busy(word, closed, 1300), 800u);
    // Starts and ends are taken modulo 2^48: an interval across the wrap.
    std::uint64_t wrap = std::uint64_t{1} << 48;
    busy_clock::leave(&word, 20, 1400, &closed);
    busy_clock::enter(&word, 3, wrap - 100);
    EXPECT_EQ(busy(word, closed, wrap + 50), 1050u);
    busy_clock::leave(&word, 3, wrap + 60, &closed);
    EXPECT_EQ(closed, 1060u);
}

TEST(MetricsModel, SumsAddEveryRow)
{
    ZoneCounters a{}, b{}, sum{};
    a.decisions[0] = 2;
    b.decisions[0] = 3;
    a.check_us.buckets[kDurationBounds] = 1;
    b.check_us.sum = 7;
    b.busy_us = 9;
    add_zone(a, &sum);
    add_zone(b, &sum);
    EXPECT_EQ(sum.decisions[0], 5u);
    EXPECT_EQ(sum.check_us.buckets[kDurationBounds], 1u);
    EXPECT_EQ(sum.check_us.sum, 7u);
    EXPECT_EQ(sum.busy_us, 9u);

    LinkCounters l{}, lsum{};
    l.calls = 4;
    l.errors[static_cast<std::size_t>(LinkError::kNoScript)] = 1;
    l.requests_per_call.buckets[2] = 4;
    l.local_us = 5;
    add_link(l, 1000, &lsum);
    l.local_since_us = 400;  // an open interval: 600 us at 1000
    add_link(l, 1000, &lsum);
    EXPECT_EQ(lsum.local_us, 610u);
    EXPECT_EQ(lsum.calls, 8u);
    EXPECT_EQ(lsum.errors[static_cast<std::size_t>(LinkError::kNoScript)], 2u);
    EXPECT_EQ(lsum.requests_per_call.buckets[2], 8u);
}

// The limit a zone whose limit is a variable applied last is written in
// each worker's row with its time, and the scrape takes the latest: not
// a sum, nor the first row's.
TEST(MetricsModel, AppliedLimitIsTheLatestRows)
{
    ZoneCounters a{}, b{}, c{}, sum{};
    a.applied_limit = 5;
    a.applied_us = 3000;
    b.applied_limit = 100;
    b.applied_us = 7000;
    c.applied_limit = 20;
    c.applied_us = 4000;
    add_zone(a, &sum);
    add_zone(b, &sum);
    add_zone(c, &sum);
    EXPECT_EQ(sum.applied_limit, 100u);
    EXPECT_EQ(sum.applied_us, 7000u);

    // A row whose worker never applied one is not taken.
    ZoneCounters none{}, only{};
    add_zone(none, &only);
    EXPECT_EQ(only.applied_limit, 0u);
}

}  // namespace
}  // namespace ratelimit
