// Calendar zones decided against the store in memory: each the fixed
// window of the period Redis's clock chooses of the two nginx sends,
// counted in the period's last ms, its key expiring at the period's end,
// in both layouts; a settle of another period changes nothing; a lease
// is a fixed window's.
#include "test/decide_fixture.hpp"
#include "test/packed_bytes.hpp"

namespace ratelimit::test {

namespace {

using V = std::vector<double>;

// Two periods in a row, as nginx sends them: [S, A) and [A, B), a day of
// 23 hours then one of 24.
constexpr double kA = 1711839600000;  // 2024-03-31 00:00 +01:00
constexpr double kB = 1711922400000;  // 2024-04-01 00:00 +02:00

class CalendarTest : public DecideTest {
protected:
    void SetUp() override { now_ms = kA - 60000; }

    // `n` requests counted, each its own call (of key "0").
    void count(int n)
    {
        for (int i = 0; i < n; i++) {
            decide({entry('c', kZone0)});
        }
    }
};

TEST_F(CalendarTest, CountsInThePeriodBeforeA)
{
    zones = {{2, kA, kB, 'c'}};
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, 1, kA - 1, 0}));
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, 2, kA - 1, 0}));
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{1, 2, kA - 1, 1}));
    EXPECT_EQ(field("0", "n"), "1711839599999");
    EXPECT_EQ(field("0", "t"), "2");
    EXPECT_EQ(expire_at("0"), kA);

    // From A on, the period that ends at B: the key of the one before,
    // which Redis keeps to the end of ms A, starts afresh.
    now_ms = kA;
    EXPECT_NE(live("0"), nullptr);
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, 1, kB - 1, 0}));
    EXPECT_EQ(field("0", "t"), "1");
    EXPECT_EQ(expire_at("0"), kB);
}

// A key of the period before, kept past its end (its expiry cleared),
// starts afresh as a fixed window's next window does; the packed string
// is a fixed window's bytes.
TEST_F(CalendarTest, ANewPeriodStartsAfreshPacked)
{
    zones = {{5, kA, kB, 'c', true, true}};
    count(2);
    EXPECT_EQ(text("0"), le(kA - 1, 8) + le(2, 8));
    EXPECT_EQ(expire_at("0"), kA);

    store.keys["0"].expire_at_ms = -1;
    now_ms = kB - 1;
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, 1, kB - 1, 0}));
    EXPECT_EQ(text("0"), le(kB - 1, 8) + le(1, 8));
    EXPECT_EQ(expire_at("0"), kB);
}

// A settle names the bucket its request was counted in: the period's last
// ms.  Of another period, or of any other ms, it changes nothing.
TEST_F(CalendarTest, ASettleOfAnotherPeriodChangesNothing)
{
    zones = {{5, kA, kB, 'c'}};
    count(3);
    auto settled = [this](double delta, double at) {
        std::vector<ReplyElement> r =
            decide({settle_entry(delta, at, kZone0)});
        return V{r[1].value, r[2].value, r[3].value, r[4].value};
    };

    EXPECT_EQ(settled(-1, kA - 1), (V{0, 2, kA - 1, -1}));
    EXPECT_EQ(settled(-1, kA - 2), (V{0, 2, kA - 1, 0}));
    EXPECT_EQ(settled(-1, kA), (V{0, 2, kA - 1, 0}));

    // Redis's clock past A: the period that ends at B counts.
    store.keys["0"].expire_at_ms = -1;
    now_ms = kA + 1;
    EXPECT_EQ(settled(-1, kA - 1), (V{0, 0, 0, 0}));
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, 1, kB - 1, 0}));
    EXPECT_EQ(settled(2, kB - 1), (V{0, 3, kB - 1, 2}));
}

// A lease grants what is left of the period's limit, counted in its last
// ms, and its unused units go back to that bucket.
TEST_F(CalendarTest, ALeaseIsAFixedWindows)
{
    zones = {{10, kA, kB, 'c'}};
    count(1);
    std::vector<ReplyElement> r = decide({lease_entry(20, kZone0)});
    EXPECT_EQ(one(r), (V{0, 10, kA - 1, 1}));
    EXPECT_EQ(r[5].value, 9);
    r = decide({settle_entry(-4, kA - 1, kZone0)});
    EXPECT_EQ(r[2].value, 6);
    EXPECT_EQ(field("0", "t"), "6");
}

}  // namespace

}  // namespace ratelimit::test
