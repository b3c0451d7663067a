// GCRA zones decided against the store in memory: a burst up to the
// capacity, a turn back per emission interval, the TAT's expiry.
#include <cmath>

#include "test/decide_fixture.hpp"

namespace ratelimit::test {

namespace {

class GcraTest : public DecideTest {
protected:
    // 10 a second (T = 100000 us), a burst of 2: a capacity of 3.
    void SetUp() override { zones = {{10, 1000, 3, 'g'}}; }

    static constexpr double kT = 100000;
};

TEST_F(GcraTest, BurstUpToItsCapacityThenRejects)
{
    for (double n = 1; n <= 3; n++) {
        std::vector<ReplyElement> reply = decide({entry('c', kZone0)});
        EXPECT_EQ(reply[1].value, 0);
        EXPECT_EQ(reply[2].value, n * kT);  // the backlog, us
        EXPECT_EQ(reply[4].value, 0);
    }

    std::vector<ReplyElement> reply = decide({entry('c', kZone0)});
    EXPECT_EQ(reply[1].value, 1);
    EXPECT_EQ(reply[2].value, 3 * kT);
    EXPECT_EQ(reply[4].value, 1);

    // The TAT, in us, and its expiry: a window after it.
    double tat = now_ms * 1000 + 3 * kT;
    ASSERT_NE(live("0"), nullptr);
    EXPECT_EQ(live("0")->text,
              std::to_string(static_cast<long long>(tat)));
    EXPECT_EQ(expire_at("0"), std::ceil(tat / 1000) + 1000);
}

TEST_F(GcraTest, ATurnComesBackEachInterval)
{
    for (int i = 0; i < 4; i++) {
        decide({entry('c', kZone0)});
    }

    now_ms += kT / 1000;
    std::vector<ReplyElement> reply = decide({entry('c', kZone0)});
    EXPECT_EQ(reply[1].value, 0);
    EXPECT_EQ(reply[2].value, 3 * kT);
    EXPECT_EQ(decide({entry('c', kZone0)})[1].value, 1);
}

TEST_F(GcraTest, ManyZonesAndPeeksTakeTheCarefulPath)
{
    decide({entry('c', kZone0)});
    std::vector<ReplyElement> reply = decide({entry('p', kZone0)});
    EXPECT_EQ(reply[1].value, 0);
    EXPECT_EQ(reply[2].value, kT);  // peeked: not moved
    Entry peek = entry('i', kZone0);
    peek.wanted = {1};
    EXPECT_EQ(decide({peek})[5].value, 0);  // no buckets to sum
}

TEST_F(GcraTest, AKeyOfAnotherTypeIsStartedAfresh)
{
    store.keys["0"] = MemoryStore::Value{true, {{"t", "5"}}, "", -1};
    std::vector<ReplyElement> reply = decide({entry('c', kZone0)});
    EXPECT_EQ(reply[1].error, nullptr);
    EXPECT_EQ(reply[2].value, kT);
    ASSERT_NE(live("0"), nullptr);
    EXPECT_FALSE(live("0")->hash);
}

}  // namespace

}  // namespace ratelimit::test
