#include "limits/gcra.hpp"

#include <gtest/gtest.h>

#include "scripts/script_batch.hpp"

namespace ratelimit {
namespace {

// 10r/s, burst=5: a request every 100 ms, 6 at once.
Policy ten_a_second(std::uint64_t burst = 5)
{
    Policy policy{10, 1000, 1000, Algorithm::kGcra, burst};
    return policy;
}

// limit_req's delay: (excess - delay) / rate, excess counted in requests
// over the rate; `ahead` is the excess plus this request, in time.
TEST(Gcra, WaitIsLimitReqs)
{
    Policy p = ten_a_second();

    EXPECT_EQ(gcra_wait_ms(p, 100000, 1, 0), 0u);   // the first: at once
    EXPECT_EQ(gcra_wait_ms(p, 200000, 1, 0), 100u);
    EXPECT_EQ(gcra_wait_ms(p, 600000, 1, 0), 500u);
    EXPECT_EQ(gcra_wait_ms(p, 600000, 1, 2), 300u);  // delay=2
    EXPECT_EQ(gcra_wait_ms(p, 300000, 1, 2), 0u);
    EXPECT_EQ(gcra_wait_ms(p, 600000, 1, kNoDelay), 0u);
    // A cost of 3 takes three turns: it waits for the first of them.
    EXPECT_EQ(gcra_wait_ms(p, 500000, 3, 0), 200u);
    EXPECT_EQ(gcra_wait_ms(p, 150400, 1, 0), 50u);   // rounded to the ms
}

TEST(Gcra, StatusCountsTurnsLeft)
{
    Policy p = ten_a_second();

    ZoneStatus s = gcra_status(p, 100000, 0, false, 0);
    EXPECT_EQ(s.limit, 6u);
    EXPECT_EQ(s.remaining, 5u);
    EXPECT_EQ(s.reset_ms, 100u);

    s = gcra_status(p, 600000, 0, false, 0);
    EXPECT_EQ(s.remaining, 0u);
    EXPECT_EQ(s.reset_ms, 600u);

    // Rounding in the script: a microsecond past is still a turn.
    EXPECT_EQ(gcra_status(p, 100001, 0, false, 0).remaining, 5u);

    // Rejected with 580 ms ahead: one more fits when 80 ms have passed.
    s = gcra_status(p, 580000, 0, true, 0);
    EXPECT_EQ(s.remaining, 0u);
    EXPECT_EQ(s.reset_ms, 80u);

    EXPECT_EQ(gcra_window_s(p, 0), 1u);
    EXPECT_EQ(gcra_window_s(ten_a_second(25), 0), 3u);
}

// The script's arguments: limit, window, capacity 1 + burst, "g".
TEST(Gcra, ZoneArguments)
{
    char out[kZoneArgsMaxSize];
    std::string args(out, write_zone_args(ten_a_second(4), out));

    EXPECT_EQ(args, "$2\r\n10\r\n$4\r\n1000\r\n$1\r\n5\r\n$1\r\ng\r\n");
}

}  // namespace
}  // namespace ratelimit
