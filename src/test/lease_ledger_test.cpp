#include "leases/lease_ledger.hpp"

#include <cstdint>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

using Kind = LeaseTake::Kind;

// Limit 10,000 over 10 servers with k = 8: a cap of 125 while the fleet
// has used nothing.
constexpr std::uint64_t kLimit = 10000;
constexpr std::uint64_t kServers = 10;

LeaseParams params()
{
    LeaseParams p;
    p.share_k = 8;
    p.lifetime_ms = 100;
    p.renew_rtts = 2;
    p.idle_ms = 1000;
    p.rate_tau_ms = 1000;
    p.initial_rtt_ms = 1;
    p.min_demand = 0;
    return p;
}

// A ledger whose rate is already `rate` units/ms.
struct Fixture {
    explicit Fixture(double rate) : ledger(state, p)
    {
        state.rate = rate;
        state.last_ms = 1000;
        state.seen = 1;
    }

    LeaseTake take(std::uint64_t cost, std::uint64_t now)
    {
        return ledger.take(cost, now, kLimit, kServers);
    }

    LeaseParams p = params();
    LeaseState state{};
    LeaseLedger ledger;
};

TEST(LeaseLedger, StateIsPlainAndStartsEmpty)
{
    static_assert(std::is_trivially_copyable_v<LeaseState>);
    LeaseState zero;
    std::memset(&zero, 0, sizeof zero);
    LeaseParams p = params();
    LeaseLedger ledger(zero, p);

    // The first request knows no rate: Redis decides it, and a lease of
    // one unit rides along (no least demand here: see below).
    LeaseTake t = ledger.take(1, 5000, kLimit, kServers);
    EXPECT_EQ(t.kind, Kind::kAskExact);
    EXPECT_EQ(t.ask, 1u);
    EXPECT_EQ(t.give_back.units, 0u);
    EXPECT_EQ(ledger.asked(), 1u);

    LeaseState copy;
    std::memcpy(&copy, &zero, sizeof copy);
    EXPECT_EQ(copy.asked, 1u);
    EXPECT_EQ(copy.sent_ms, 5000u);
}

TEST(LeaseLedger, TakesLocallyAndRenewsOnceAtLowWater)
{
    // 0.5 units/ms: size ceil(0.5 * (100 + 2 * 1)) = 51, low water 1.
    Fixture f(0.5);
    LeaseTake first = f.take(1, 1000);
    ASSERT_EQ(first.kind, Kind::kAskExact);
    ASSERT_EQ(first.ask, 52u);  // the rate grew by this request
    EXPECT_EQ(f.ledger.granted(52, 7, 1000, 900, 1002, {}).units, 0u);
    EXPECT_EQ(f.ledger.units(), 52u);
    EXPECT_DOUBLE_EQ(f.ledger.rtt_ms(), 2);

    int renewals = 0;
    std::uint64_t now = 1002;
    while (f.ledger.units() > 0) {
        LeaseTake t = f.take(1, now += 2);
        ASSERT_NE(t.kind, Kind::kAskExact);
        ASSERT_NE(t.kind, Kind::kWaitRenewal);
        if (t.kind == Kind::kRenewAndTaken) {
            renewals++;
            // Tops the lease up to its size, from at most the low water.
            std::uint64_t size = lease_size(
                f.ledger.rate(), lease_horizon_ms(f.p, f.ledger.rtt_ms()),
                f.ledger.cap(), f.p.min_demand);
            EXPECT_EQ(f.ledger.units() + t.ask, size);
            EXPECT_LE(f.ledger.units(),
                      lease_low_water(f.ledger.rate(), f.p,
                                      f.ledger.rtt_ms(), size));
            EXPECT_GT(f.ledger.units(), 0u);
        }
    }
    // Never two renewals in flight.
    EXPECT_EQ(renewals, 1);
    EXPECT_GT(f.ledger.asked(), 0u);

    // Dry with a renewal in flight that covers it: wait, not counted yet.
    double rate = f.ledger.rate();
    EXPECT_EQ(f.take(1, now).kind, Kind::kWaitRenewal);
    EXPECT_EQ(f.take(3, now).kind, Kind::kWaitRenewal);
    EXPECT_DOUBLE_EQ(f.ledger.rate(), rate);
    // A cost the renewal cannot cover asks Redis, and no second renewal.
    LeaseTake big = f.take(1000, now);
    EXPECT_EQ(big.kind, Kind::kAskExact);
    EXPECT_EQ(big.ask, 0u);
}

TEST(LeaseLedger, HoldsAtMostTheCapOfItsLastAsk)
{
    // A rate far above the cap: every ask is cut to the cap, 125.
    Fixture f(100);
    LeaseTake t = f.take(1, 1000);
    ASSERT_EQ(t.ask, 125u);
    f.ledger.granted(125, 7, 125, 900, 1001, {});
    for (std::uint64_t now = 1001; f.ledger.units() > 0; now++) {
        t = f.take(1, now);
        EXPECT_LE(f.ledger.units() + f.ledger.asked(), 125u);
    }
    // The fleet has used 8,000: the cap falls to 25.
    f.ledger.granted(f.ledger.asked(), 7, 8000, 800, 1200, {});
    t = f.take(1, 1201);
    EXPECT_LE(f.ledger.units() + f.ledger.asked(), 125u);
    while (f.ledger.units() > 0) {
        t = f.take(1, 1202);
    }
    EXPECT_EQ(t.kind, Kind::kRenewAndTaken);
    EXPECT_EQ(f.ledger.cap(), 25u);
    EXPECT_EQ(f.ledger.units() + t.ask, 25u);
}

// A subject's override (issue 41), as Redis's replies tell it, sizes the
// asks while in force: a raised one gets larger leases, a lowered one
// smaller, one of 0 none.
TEST(LeaseLedger, SizesItsAsksByTheOverrideInForce)
{
    // A rate far above the cap: every ask is cut to the cap.
    Fixture f(100);
    LeaseTake t = f.take(1, 1000);
    ASSERT_EQ(t.ask, 125u);  // 10,000 / (8 * 10)
    EXPECT_FALSE(f.ledger.override_at(1000).set);

    // Granted under an override of 40,000 that never lapses: the next ask
    // tops the lease up to floor((40,000 - 125) / 80) = 498.
    f.ledger.granted(125, 7, 125, 900, 1001, {true, 40000, 60000, 0});
    Override o = f.ledger.override_at(1001);
    EXPECT_TRUE(o.set);
    EXPECT_EQ(o.limit, 40000u);
    EXPECT_EQ(o.window_ms, 60000u);
    EXPECT_EQ(o.left_ms, 0u);
    std::uint64_t now = 1001;
    do {
        t = f.take(1, ++now);
    } while (t.kind == Kind::kTaken);
    ASSERT_EQ(t.kind, Kind::kRenewAndTaken);
    EXPECT_EQ(f.ledger.cap(), 498u);
    EXPECT_EQ(f.ledger.units() + t.ask, 498u);

    // Lowered to 2,000, the fleet at 1,000: floor(1,000 / 80) = 12.
    f.ledger.granted(t.ask, 7, 1000, 800, ++now, {true, 2000, 60000, 0});
    do {
        t = f.take(1, ++now);
    } while (t.kind == Kind::kTaken);
    EXPECT_EQ(f.ledger.cap(), 12u);
    EXPECT_EQ(f.ledger.units() + t.ask, 12u);

    // Of 0: nothing more is asked, every request goes to Redis once the
    // lease is used up.
    f.ledger.granted(t.ask, 7, 1000, 700, ++now, {true, 0, 60000, 0});
    while (f.ledger.units() > 0) {
        EXPECT_EQ(f.take(1, ++now).ask, 0u);
    }
    t = f.take(1, ++now);
    EXPECT_EQ(t.kind, Kind::kAskExact);
    EXPECT_EQ(t.ask, 0u);
    EXPECT_EQ(f.ledger.override_at(now).limit, 0u);

    // An exact reply under none: the zone's limit again.
    f.ledger.counted(1000, {}, now);
    EXPECT_FALSE(f.ledger.override_at(now).set);
    t = f.take(1, ++now);
    EXPECT_EQ(t.ask, 112u);  // (10,000 - 1,000) / 80
}

// An override with an end is forgotten there, counted from when the call
// that told it left; a reply with none, or a forgiving, forgets it at once;
// a grant that came after its renewal was given up on is not dated.
TEST(LeaseLedger, ForgetsTheOverrideWhenItLapsesOrIsToldNone)
{
    Fixture f(100);
    LeaseTake t = f.take(1, 1000);  // sent at 1000
    f.ledger.granted(t.ask, 7, 125, 900, 1040, {true, 40000, 60000, 300});
    EXPECT_EQ(f.ledger.override_at(1299).left_ms, 1u);
    EXPECT_FALSE(f.ledger.override_at(1300).set);
    EXPECT_EQ(f.state.override_limit, 0u);

    // Learnt from an exact reply, sent at 1400, lapsing 50 ms after.
    f.ledger.counted(125, {true, 40000, 60000, 50}, 1400);
    EXPECT_TRUE(f.ledger.override_at(1449).set);
    EXPECT_FALSE(f.ledger.override_at(1450).set);

    f.ledger.counted(125, {true, 40000, 60000, 0}, 1500);
    EXPECT_TRUE(f.ledger.override_at(1500).set);
    f.ledger.forget_override();
    EXPECT_FALSE(f.ledger.override_at(1500).set);

    f.ledger.counted(125, {true, 40000, 60000, 0}, 1500);
    while (f.ledger.units() > 0 || f.ledger.asked() == 0) {
        t = f.take(1, 1501);
    }
    f.ledger.renewal_failed();
    f.ledger.granted(5, 7, 125, 900, 1510, {true, 7, 60000, 0});
    EXPECT_EQ(f.ledger.override_at(1510).limit, 40000u);
    t = f.take(1, 1511);
    ASSERT_GT(t.ask, 0u);
    f.ledger.granted(t.ask, 7, 125, 900, 1512, {});
    EXPECT_FALSE(f.ledger.override_at(1512).set);
}

TEST(LeaseLedger, ExactModeNearTheLimit)
{
    Fixture f(1);
    // 9,201 used of 10,000: less than k * servers = 80 remain.
    f.ledger.counted(9921, {}, 999);
    LeaseTake t = f.take(1, 1000);
    EXPECT_EQ(t.kind, Kind::kAskExact);
    EXPECT_EQ(t.ask, 0u);
    EXPECT_EQ(f.ledger.asked(), 0u);
    // The window slid: room again.
    f.ledger.counted(5000, {}, 1000);
    t = f.take(1, 1001);
    EXPECT_EQ(t.kind, Kind::kAskExact);
    EXPECT_GT(t.ask, 0u);
}

TEST(LeaseLedger, DiesAtTheBucketsEndCountedFromTheSendTime)
{
    Fixture f(0.05);
    LeaseTake t = f.take(1, 1000);
    ASSERT_GT(t.ask, 0u);
    // Sent at 1000; Redis said 300 ms were left of bucket 7 when it
    // granted; the reply came at 1040.  Redis's bucket 7 ends no earlier
    // than 1300 by this clock, less the 1 ms of the clocks' rounding.
    f.ledger.granted(t.ask, 7, 10, 300, 1040, {});
    std::uint64_t units = f.ledger.units();
    EXPECT_EQ(f.take(1, 1298).kind, Kind::kTaken);
    EXPECT_EQ(f.ledger.expire(1298).units, 0u);
    LeaseTake late = f.take(1, 1299);
    EXPECT_EQ(late.give_back.units, units - 1);
    EXPECT_EQ(late.give_back.bucket, 7u);
    EXPECT_EQ(late.kind, Kind::kAskExact);
    EXPECT_EQ(f.ledger.units(), 0u);
}

TEST(LeaseLedger, ExpireAtTheEndAndWhenQuiet)
{
    Fixture f(0.05);
    LeaseTake t = f.take(1, 1000);
    f.ledger.granted(t.ask, 7, 10, 5000, 1001, {});
    std::uint64_t units = f.ledger.units();
    EXPECT_EQ(f.ledger.expire(1999).units, 0u);
    LeaseReturn back = f.ledger.expire(2000);  // 1,000 ms quiet
    EXPECT_EQ(back.units, units);
    EXPECT_EQ(back.bucket, 7u);
    EXPECT_EQ(f.ledger.expire(2001).units, 0u);  // given once
    EXPECT_EQ(f.ledger.release().units, 0u);
}

TEST(LeaseLedger, AGrantOfTheSameBucketAddsOfANewOneReplaces)
{
    Fixture f(1);
    LeaseTake t = f.take(1, 1000);
    f.ledger.granted(10, 7, 10, 500, 1001, {});  // ends at 1500
    while (f.ledger.units() > 2) {
        t = f.take(1, 1002);
    }
    ASSERT_GT(f.ledger.asked(), 0u);
    // Same bucket: added; its end is the later of the two.
    EXPECT_EQ(f.ledger.granted(5, 7, 30, 490, 1003, {}).units, 0u);
    EXPECT_EQ(f.ledger.units(), 7u);
    EXPECT_EQ(f.state.end_ms, 1499u);

    while (f.ledger.asked() == 0) {
        t = f.take(1, 1004);
    }
    std::uint64_t left = f.ledger.units();
    // Granted in bucket 8: bucket 7 has ended by Redis's clock; its units
    // go back, whatever this server's estimate of its end said.
    LeaseReturn back = f.ledger.granted(20, 8, 60, 1000, 1006, {});
    EXPECT_EQ(back.units, left);
    EXPECT_EQ(back.bucket, 7u);
    EXPECT_EQ(f.ledger.units(), 20u);
    EXPECT_EQ(f.state.bucket, 8u);
    EXPECT_EQ(f.state.end_ms, 2003u);
}

TEST(LeaseLedger, GrantsNoLongerUsableGoBack)
{
    Fixture f(1);
    LeaseTake t = f.take(1, 1000);
    // Dead on arrival: 5 ms were left of the bucket, the reply took 9.
    LeaseReturn back = f.ledger.granted(t.ask, 7, 10, 5, 1009, {});
    EXPECT_EQ(back.units, t.ask);
    EXPECT_EQ(f.ledger.units(), 0u);

    // A reply after the renewal was given up on cannot be dated.
    t = f.take(1, 1010);
    ASSERT_GT(t.ask, 0u);
    f.ledger.renewal_failed();
    EXPECT_EQ(f.ledger.asked(), 0u);
    back = f.ledger.granted(t.ask, 7, 10, 500, 1020, {});
    EXPECT_EQ(back.units, t.ask);
    EXPECT_EQ(f.ledger.units(), 0u);

    // A grant of nothing: exact mode until the next ask.
    t = f.take(1, 1030);
    EXPECT_EQ(f.ledger.granted(0, 7, 10000, 500, 1031, {}).units, 0u);
    EXPECT_EQ(f.ledger.asked(), 0u);
    EXPECT_EQ(f.take(1, 1032).ask, 0u);
}

// Random requests, grants (any part of the ask, any bucket, any delay),
// failures and expiries: units + asked never pass the cap of the last ask,
// a lease is never used at or past its end, and every unit granted is
// taken, given back or still held.
TEST(LeaseLedger, RandomSequencesKeepTheInvariants)
{
    for (std::uint32_t seed = 1; seed <= 20; seed++) {
        SCOPED_TRACE(seed);
        std::mt19937_64 rng(seed);
        Fixture f(0);
        std::uint64_t now = 1000;
        std::uint64_t bucket = 1;
        std::uint64_t granted = 0, taken = 0, back = 0, lost = 0;
        std::uint64_t fleet_used = 0;

        for (int step = 0; step < 20000; step++) {
            now += rng() % 3;
            int what = static_cast<int>(rng() % 10);
            if (what < 6) {
                std::uint64_t units = f.ledger.units();
                bool live = now < f.state.end_ms;
                std::uint64_t cost = 1 + rng() % 3;
                LeaseTake t = f.ledger.take(cost, now, kLimit, kServers);
                back += t.give_back.units;
                if (t.kind == Kind::kTaken
                    || t.kind == Kind::kRenewAndTaken)
                {
                    ASSERT_TRUE(live);
                    ASSERT_GE(units, cost);
                    taken += cost;
                }
            } else if (what < 8 && f.ledger.asked() > 0) {
                if (rng() % 10 == 0) {
                    lost += f.ledger.asked();
                    f.ledger.renewal_failed();
                    continue;
                }
                if (rng() % 4 == 0) {
                    bucket++;
                }
                std::uint64_t g = rng() % (f.ledger.asked() + 1);
                fleet_used = rng() % kLimit;
                granted += g;
                back += f.ledger.granted(g, bucket, fleet_used,
                                         rng() % 400, now, {}).units;
            } else if (what == 8) {
                back += f.ledger.expire(now).units;
            } else {
                f.ledger.counted(rng() % kLimit, {}, now);
            }
            ASSERT_LE(f.ledger.units() + f.ledger.asked(), f.ledger.cap());
            ASSERT_EQ(granted, taken + back + f.ledger.units());
        }
        EXPECT_GT(taken, 0u);
        EXPECT_GT(back, 0u);
        (void) lost;
    }
}

}  // namespace
}  // namespace ratelimit

namespace ratelimit {
namespace {

// A subject too slow for a lease to pay is decided exactly, with no lease
// asked; once its rate expects min_demand units in a lease's life, a lease
// is asked.
TEST(LeaseLedger, NoLeaseBelowTheLeastDemand)
{
    LeaseState state;
    std::memset(&state, 0, sizeof state);
    LeaseParams p = params();
    p.min_demand = 2;
    LeaseLedger ledger(state, p);
    std::uint64_t now = 1000;

    // 1 unit/s: 0.1 expected in a horizon of 102 ms.
    for (int i = 0; i < 5; i++) {
        LeaseTake t = ledger.take(1, now += 1000, kLimit, kServers);
        EXPECT_EQ(t.kind, Kind::kAskExact);
        EXPECT_EQ(t.ask, 0u);
    }

    // 50 units/s: 5 expected once the estimate has caught up (its time
    // constant is 1 s): a lease is asked within the second.
    std::uint64_t asked = 0;
    for (int i = 0; i < 50 && asked == 0; i++) {
        asked = ledger.take(1, now += 20, kLimit, kServers).ask;
    }
    EXPECT_GE(asked, 2u);
}

}  // namespace
}  // namespace ratelimit
