// Settles against the store in memory: units given back to (or added to)
// the bucket a request was counted in, never below 0, only inside the
// window; a GCRA zone's TAT moved back, never before now.
#include "test/decide_fixture.hpp"

namespace ratelimit::test {

namespace {

// A settle's reply from element 1: rejected, count, oldest, applied.
std::vector<double> settled(const std::vector<ReplyElement> &reply)
{
    return {reply[1].value, reply[2].value, reply[3].value, reply[4].value};
}

using V = std::vector<double>;

class SettleTest : public DecideTest {
protected:
    void count(int n)
    {
        for (int i = 0; i < n; i++) {
            decide({entry('c', kZone0)});
        }
    }
};

TEST_F(SettleTest, SlidingRefundNeverBelowZero)
{
    zones = {{5, 1000, 10, 's'}};
    double b = bucket(1000);
    count(3);
    EXPECT_EQ(settled(decide({settle_entry(-2, b, kZone0)})),
              (V{0, 1, b, -2}));
    EXPECT_EQ(settled(decide({settle_entry(-5, b, kZone0)})),
              (V{0, 0, b, -1}));
    EXPECT_EQ(field("0", "t"), "0");
}

TEST_F(SettleTest, SlidingSettleOfAnEarlierBucket)
{
    zones = {{9, 1000, 10, 's'}};
    double b = bucket(1000);
    count(2);
    now_ms += 3000;
    count(1);
    EXPECT_EQ(settled(decide({settle_entry(4, b, kZone0)})),
              (V{0, 7, b, 4}));
    EXPECT_EQ(field("0", std::to_string(static_cast<long long>(b))), "6");
    EXPECT_EQ(field("0", "n"),
              std::to_string(static_cast<long long>(b + 3)));
}

TEST_F(SettleTest, OutsideTheWindowAppliesNothing)
{
    zones = {{5, 1000, 10, 's'}};
    double b = bucket(1000);
    count(2);
    EXPECT_EQ(settled(decide({settle_entry(-1, b - 10, kZone0)})),
              (V{0, 2, b, 0}));
    EXPECT_EQ(settled(decide({settle_entry(1, b + 1, kZone0)})),
              (V{0, 2, b, 0}));
}

TEST_F(SettleTest, FixedWindowsCount)
{
    zones = {{5, 60000, 1, 'f'}};
    double w = bucket(60000);
    count(3);
    EXPECT_EQ(settled(decide({settle_entry(-1, w, kZone0)})),
              (V{0, 2, w, -1}));
    EXPECT_EQ(field("0", "t"), "2");
}

TEST_F(SettleTest, GcraRefundMovesTheTatBackNeverBeforeNow)
{
    zones = {{10, 1000, 3, 'g'}};
    count(2);
    EXPECT_EQ(settled(decide({settle_entry(-1, 0, kZone0)})),
              (V{0, 100000, 0, -1}));
    EXPECT_EQ(settled(decide({settle_entry(-5, 0, kZone0)})),
              (V{0, 0, 0, -1}));
    EXPECT_EQ(live("0"), nullptr);
}

}  // namespace

}  // namespace ratelimit::test
