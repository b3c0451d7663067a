#include "limits/override.hpp"

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

const Policy kWindow{100, 60000, 1000, Algorithm::kSliding, 0};
const Policy kGcra{10, 1000, 1000, Algorithm::kGcra, 4};

// A window zone takes the override's limit in its own window; a GCRA zone
// its rate: the limit per the override's window.
TEST(Override, AppliesAsTheZoneCounts)
{
    Override o{true, 250, 3600000, 0};
    Policy p = overridden(kWindow, o);
    EXPECT_EQ(p.limit, 250u);
    EXPECT_EQ(p.window_ms, 60000u);
    EXPECT_EQ(p.bucket_ms, 1000u);

    p = overridden(kGcra, o);
    EXPECT_EQ(p.limit, 250u);
    EXPECT_EQ(p.window_ms, 3600000u);
    EXPECT_EQ(p.bucket_ms, 3600000u);
    EXPECT_EQ(p.burst, 4u);

    p = overridden(kGcra, {});
    EXPECT_EQ(p.limit, 10u);
    EXPECT_EQ(p.window_ms, 1000u);
}

// In the zone's window, for fail local's shares: a count as it is, a rate
// scaled to the window and rounded down, at most 2^53.
TEST(Override, InTheZonesWindow)
{
    EXPECT_EQ(override_in_window(kWindow, {true, 7, 3600000, 0}), 7u);
    EXPECT_EQ(override_in_window(kGcra, {true, 600, 60000, 0}), 10u);
    EXPECT_EQ(override_in_window(kGcra, {true, 1, 60000, 0}), 0u);
    EXPECT_EQ(override_in_window(kGcra, {true, 9007199254740992, 1, 0}),
              9007199254740992u);
}

}  // namespace
}  // namespace ratelimit
