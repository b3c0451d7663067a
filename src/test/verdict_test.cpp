#include "scripts/verdict.hpp"

#include <cstdint>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "limits/sliding_window.hpp"

namespace ratelimit {
namespace {

constexpr std::uint64_t kNow = 1700000000123;  // bucket 1700000000 at 1 s

struct Zone {
    Policy policy;
    bool enforced;
    ZoneCount count;
};

Verdict decide_for(const std::vector<Zone> &zones, bool rejected,
                   std::uint64_t now_ms = kNow)
{
    std::vector<const Policy *> policies;
    std::unique_ptr<bool[]> enforced(new bool[zones.size()]);
    std::vector<ZoneCount> counts;

    for (std::size_t i = 0; i < zones.size(); i++) {
        policies.push_back(&zones[i].policy);
        enforced[i] = zones[i].enforced;
        counts.push_back(zones[i].count);
    }
    std::optional<Verdict> v = decide_verdict(policies.data(), enforced.get(),
                                              counts.data(), zones.size(),
                                              now_ms, rejected);
    EXPECT_TRUE(v.has_value()) << "a consistent reply gave no verdict";
    return v.value_or(Verdict{});
}

const Policy kTenPerMinute{10, 60000, 1000};

TEST(Decide, OneZonePassed)
{
    Verdict v = decide_for({{kTenPerMinute, true, {3, 1699999990, false}}},
                           false);
    EXPECT_EQ(v.outcome, Outcome::kPassed);
    EXPECT_EQ(v.zone, 0u);
    EXPECT_EQ(v.status.limit, 10u);
    EXPECT_EQ(v.status.remaining, 7u);
    // Bucket 1699999990 leaves the window at (1699999990 + 60) * 1000.
    EXPECT_EQ(v.status.reset_ms, 1700000050000u - kNow);
    EXPECT_EQ(v.status.reset_ms, 49877u);
    EXPECT_EQ(v.status.reset_ms,
              SlidingWindow(kTenPerMinute).ms_until_expiry(1699999990, kNow));
}

TEST(Decide, LastRequestThatFits)
{
    Verdict v = decide_for({{kTenPerMinute, true, {10, 1699999941, false}}},
                           false);
    EXPECT_EQ(v.outcome, Outcome::kPassed);
    EXPECT_EQ(v.status.remaining, 0u);
    EXPECT_EQ(v.status.reset_ms, 877u);
}

TEST(Decide, FineBuckets)
{
    const Policy fine{5, 1000, 20};
    // Current bucket 85000000006; ten buckets back it still has 877 ms.
    Verdict v = decide_for({{fine, true, {2, 85000000000, false}}}, false);
    EXPECT_EQ(v.status.remaining, 3u);
    EXPECT_EQ(v.status.reset_ms, 877u);
}

TEST(Decide, Rejected)
{
    const Policy a{100, 60000, 1000};
    const Policy b{50, 60000, 1000};
    const Policy c{10, 3600000, 60000};
    const Policy d{20, 60000, 1000};

    Verdict v = decide_for({
        {a, false, {100, 1699999950, true}},   // over, dry run
        {b, true, {1, 1700000000, false}},     // fits
        {c, true, {10, 28333331, true}},       // over, enforced: this one
        {d, true, {20, 1699999945, true}},     // over, enforced, later
    }, true);

    EXPECT_EQ(v.outcome, Outcome::kRejected);
    EXPECT_EQ(v.zone, 2u);
    EXPECT_EQ(v.status.limit, 10u);
    EXPECT_EQ(v.status.remaining, 0u);
    // Hour zone, minute buckets: bucket 28333331 ends the window at
    // (28333331 + 60) * 60000 = 1700003460000.
    EXPECT_EQ(v.status.reset_ms, 1700003460000u - kNow);
}

TEST(Decide, RejectedByFirstZone)
{
    Verdict v = decide_for({
        {kTenPerMinute, true, {10, 1699999960, true}},
        {Policy{1, 1000, 20}, true, {1, 85000000005, true}},
    }, true);
    EXPECT_EQ(v.outcome, Outcome::kRejected);
    EXPECT_EQ(v.zone, 0u);
    EXPECT_EQ(v.status.remaining, 0u);
    EXPECT_EQ(v.status.reset_ms, 1700000020000u - kNow);
}

TEST(Decide, RejectedIgnoresFewerRemainingElsewhere)
{
    // Zone 0 is over only in dry run, and zone 1 rejects: zone 1 is reported
    // even though both have nothing remaining.
    Verdict v = decide_for({
        {Policy{3, 60000, 1000}, false, {3, 1699999999, true}},
        {kTenPerMinute, true, {10, 1699999970, true}},
    }, true);
    EXPECT_EQ(v.outcome, Outcome::kRejected);
    EXPECT_EQ(v.zone, 1u);
    EXPECT_EQ(v.status.limit, 10u);
    EXPECT_EQ(v.status.reset_ms, 1700000030000u - kNow);
}

TEST(Decide, DryRunOnlyOver)
{
    const Policy dry{5, 60000, 1000};
    Verdict v = decide_for({
        {kTenPerMinute, true, {4, 1699999990, false}},
        {dry, false, {5, 1699999980, true}},
    }, false);
    EXPECT_EQ(v.outcome, Outcome::kRejectedDryRun);
    EXPECT_EQ(v.zone, 1u);
    EXPECT_EQ(v.status.limit, 5u);
    EXPECT_EQ(v.status.remaining, 0u);
    EXPECT_EQ(v.status.reset_ms, 1700000040000u - kNow);
}

TEST(Decide, FewestRemainingWins)
{
    const Policy big{100, 3600000, 60000};
    Verdict v = decide_for({
        {kTenPerMinute, true, {3, 1699999990, false}},  // 7 left
        {big, true, {95, 28333320, false}},             // 5 left
        {Policy{8, 60000, 1000}, true, {2, 1699999999, false}},  // 6 left
    }, false);
    EXPECT_EQ(v.outcome, Outcome::kPassed);
    EXPECT_EQ(v.zone, 1u);
    EXPECT_EQ(v.status.limit, 100u);
    EXPECT_EQ(v.status.remaining, 5u);
    EXPECT_EQ(v.status.reset_ms,
              (std::uint64_t{28333320} + 60) * 60000 - kNow);
}

TEST(Decide, FirstOnTie)
{
    Verdict v = decide_for({
        {kTenPerMinute, true, {8, 1699999990, false}},        // 2 left
        {Policy{5, 60000, 1000}, true, {3, 1699999995, false}},  // 2 left
        {Policy{3, 60000, 1000}, true, {1, 1699999999, false}},  // 2 left
    }, false);
    EXPECT_EQ(v.zone, 0u);
    EXPECT_EQ(v.status.limit, 10u);
    EXPECT_EQ(v.status.remaining, 2u);

    Verdict later = decide_for({
        {kTenPerMinute, true, {3, 1699999990, false}},        // 7 left
        {Policy{5, 60000, 1000}, true, {3, 1699999995, false}},  // 2 left
        {Policy{3, 60000, 1000}, true, {1, 1699999999, false}},  // 2 left
    }, false);
    EXPECT_EQ(later.zone, 1u);
    EXPECT_EQ(later.status.limit, 5u);
}

// A zone whose subject is banned rejects it with nothing remaining until
// the ban ends, whatever its count: the zone with the ban is the verdict's
// (enforced and over), not one with fewer remaining.
TEST(Decide, BannedUntilTheBanEnds)
{
    ZoneCount banned{1, 1699999990, true};
    banned.ban_left_ms = 3599500;
    Verdict v = decide_for({{kTenPerMinute, true, {10, 1699999990, false}},
                            {kTenPerMinute, true, banned}},
                           true);
    EXPECT_EQ(v.outcome, Outcome::kRejected);
    EXPECT_EQ(v.zone, 1u);
    EXPECT_EQ(v.status.limit, 10u);
    EXPECT_EQ(v.status.remaining, 0u);
    EXPECT_EQ(v.status.reset_ms, 3599500u);
}

TEST(Decide, OldestZeroMeansNoReset)
{
    Verdict v = decide_for({{kTenPerMinute, true, {0, 0, false}}}, false);
    EXPECT_EQ(v.outcome, Outcome::kPassed);
    EXPECT_EQ(v.status.remaining, 10u);
    EXPECT_EQ(v.status.reset_ms, 0u);

    // Near the epoch bucket 0 would still be live: 0 must mean "none".
    Verdict early = decide_for({{kTenPerMinute, true, {0, 0, false}}}, false,
                               30000);
    EXPECT_EQ(early.status.reset_ms, 0u);
}

TEST(Decide, ExpiredOldestMeansNoReset)
{
    Verdict v = decide_for({{kTenPerMinute, true, {1, 1699999940, false}}},
                           false);
    EXPECT_EQ(v.status.reset_ms, 0u);
}

TEST(Decide, TotalAboveLowerLimit)
{
    // The limit went from 10 to 5 while 8 requests were in the window.
    const Policy lowered{5, 60000, 1000};
    Verdict v = decide_for({{lowered, true, {8, 1699999990, false}}}, false);
    EXPECT_EQ(v.status.limit, 5u);
    EXPECT_EQ(v.status.remaining, 0u);

    Verdict over = decide_for({{lowered, true, {8, 1699999990, true}}}, true);
    EXPECT_EQ(over.outcome, Outcome::kRejected);
    EXPECT_EQ(over.status.remaining, 0u);
}

TEST(Decide, OverMeansNothingRemains)
{
    // A dry-run zone the request did not fit in reports its count without
    // this request, which can be below the limit after a limit change.
    Verdict v = decide_for({{kTenPerMinute, false, {9, 1699999990, true}}},
                           false);
    EXPECT_EQ(v.outcome, Outcome::kRejectedDryRun);
    EXPECT_EQ(v.status.remaining, 0u);
}

// The script rejects only for an enforced zone the request did not fit; a
// reply that says otherwise gives no verdict (the caller fails it).
TEST(Decide, RejectionWithoutAnEnforcedZoneOverIsNoVerdict)
{
    const Policy *policies[2] = {&kTenPerMinute, &kTenPerMinute};
    const bool enforced[2] = {true, false};
    const ZoneCount counts[2] = {{3, 1699999990, false},
                                 {9, 1699999990, true}};

    EXPECT_FALSE(decide_verdict(policies, enforced, counts, 2, kNow, true));
    EXPECT_FALSE(decide_verdict(policies, enforced, counts, 0, kNow, true));
    EXPECT_TRUE(decide_verdict(policies, enforced, counts, 2, kNow, false));
}

}  // namespace
}  // namespace ratelimit
