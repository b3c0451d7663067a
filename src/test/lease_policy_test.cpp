#include "leases/lease_policy.hpp"

#include <cmath>
#include <cstdint>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

TEST(LeasePolicy, RateOfASteadyStreamConvergesToIt)
{
    // One unit every 4 ms: 0.25 units/ms.
    double rate = 0;
    for (int i = 0; i < 5000; i++) {
        rate = rate_observe(rate, 4, 1, 1000);
    }
    EXPECT_NEAR(rate, 0.25, 0.01);

    // Costs count as units: 3 units every 4 ms.
    double units = 0;
    for (int i = 0; i < 5000; i++) {
        units = rate_observe(units, 4, 3, 1000);
    }
    EXPECT_NEAR(units, 0.75, 0.03);
}

TEST(LeasePolicy, RateDecaysWithTau)
{
    EXPECT_DOUBLE_EQ(rate_observe(0, 0, 1, 1000), 0.001);
    EXPECT_NEAR(rate_decayed(1.0, 1000, 1000), std::exp(-1.0), 1e-12);
    EXPECT_NEAR(rate_observe(1.0, 2000, 0, 1000), std::exp(-2.0), 1e-12);
    EXPECT_DOUBLE_EQ(rate_decayed(1.0, 0, 1000), 1.0);
    // tau 0 is taken as 1 ms, not a division by zero.
    EXPECT_DOUBLE_EQ(rate_observe(0, 0, 2, 0), 2.0);
}

TEST(LeasePolicy, RttTakesRisesAtOnceAndFallsSlowly)
{
    EXPECT_DOUBLE_EQ(rtt_observe(1, 5), 5);
    EXPECT_DOUBLE_EQ(rtt_observe(5, 1), 4.5);
    EXPECT_DOUBLE_EQ(rtt_observe(2, 2), 2);
}

TEST(LeasePolicy, CapIsTheFairShareOfWhatRemains)
{
    // 10,000 - 2,000 over 8 * 100 servers.
    EXPECT_EQ(lease_cap(10000, 2000, 100, 8), 10u);
    EXPECT_EQ(lease_cap(10000, 0, 100, 8), 12u);
    EXPECT_EQ(lease_cap(1000, 0, 2, 8), 62u);
    // Below k * servers units remaining: exact mode.
    EXPECT_EQ(lease_cap(10000, 9201, 100, 8), 0u);
    EXPECT_EQ(lease_cap(10000, 9200, 100, 8), 1u);
    EXPECT_EQ(lease_cap(10000, 10000, 100, 8), 0u);
    EXPECT_EQ(lease_cap(10000, 12000, 100, 8), 0u);
    // No servers known yet counts as one; k 0 as 1.
    EXPECT_EQ(lease_cap(800, 0, 0, 8), 100u);
    EXPECT_EQ(lease_cap(800, 0, 1, 0), 800u);
}

TEST(LeasePolicy, SizeFollowsTheRateWithinOneAndTheCap)
{
    LeaseParams params;
    params.lifetime_ms = 500;
    params.renew_rtts = 2;
    double horizon = lease_horizon_ms(params, 5);
    EXPECT_DOUBLE_EQ(horizon, 510);

    EXPECT_EQ(lease_size(0.1, horizon, 1000, 0), 51u);
    EXPECT_EQ(lease_size(0.1001, horizon, 1000, 0), 52u);  // rounded up
    EXPECT_EQ(lease_size(0.1, horizon, 20, 0), 20u);       // the cap
    EXPECT_EQ(lease_size(0, horizon, 20, 0), 1u);          // at least one
    EXPECT_EQ(lease_size(0.1, horizon, 0, 0), 0u);         // exact mode
    EXPECT_EQ(lease_size(1e300, horizon, 7, 0), 7u);
    // A subject too slow for a lease to pay: exact mode.
    EXPECT_EQ(lease_size(0.001, horizon, 1000, 2), 0u);    // 0.51 expected
    EXPECT_EQ(lease_size(0.004, horizon, 1000, 2), 3u);    // 2.04 expected
}

TEST(LeasePolicy, LowWaterIsTwoRoundTripsOfTheRateBelowTheSize)
{
    LeaseParams params;
    params.renew_rtts = 2;
    // 0.5 units/ms over 2 * 3 ms: 3 units.
    EXPECT_EQ(lease_low_water(0.5, params, 3, 100), 3u);
    EXPECT_EQ(lease_low_water(0.51, params, 3, 100), 4u);
    // Never the size itself: a renewal at the mark asks for a unit.
    EXPECT_EQ(lease_low_water(0.5, params, 3, 3), 2u);
    EXPECT_EQ(lease_low_water(0.5, params, 3, 1), 0u);
    EXPECT_EQ(lease_low_water(0.5, params, 3, 0), 0u);
    EXPECT_EQ(lease_low_water(0, params, 3, 10), 0u);
}

}  // namespace
}  // namespace ratelimit
