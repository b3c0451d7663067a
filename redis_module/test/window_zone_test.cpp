// Sliding and fixed windows decided against the store in memory: counted
// up to the limit, rolling as buckets leave the window, reset as a fixed
// window starts, and the expiry time each key is written with.
#include "test/decide_fixture.hpp"

namespace ratelimit::test {

namespace {

using V = std::vector<double>;

class WindowTest : public DecideTest {};

TEST_F(WindowTest, SlidingFillsToItsLimitThenRejects)
{
    zones = {{3, 1000, 10, 's'}};
    double b = bucket(1000);

    for (double n = 1; n <= 3; n++) {
        EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, n, b, 0}));
    }

    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{1, 3, b, 1}));
    EXPECT_EQ(field("0", "t"), "3");
    EXPECT_EQ(field("0", std::to_string(static_cast<long long>(b))), "3");
    EXPECT_EQ(expire_at("0"), (b + 10) * 1000);
}

TEST_F(WindowTest, SlidingRollsAsBucketsLeave)
{
    zones = {{3, 1000, 10, 's'}};
    double b = bucket(1000);
    decide({entry('c', kZone0)});
    decide({entry('c', kZone0)});
    now_ms += 5000;
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, 3, b, 0}));
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{1, 3, b, 1}));
    EXPECT_EQ(expire_at("0"), (b + 15) * 1000);

    // Bucket b leaves the window: its 2 units go, and so does its field.
    now_ms += 5000;
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, 2, b + 5, 0}));
    EXPECT_EQ(field("0", std::to_string(static_cast<long long>(b))), "");
    EXPECT_EQ(field("0", "t"), "2");
    EXPECT_EQ(field("0", "o"), std::to_string(static_cast<long long>(b + 5)));
}

TEST_F(WindowTest, SlidingKeyExpiresWithItsWindow)
{
    zones = {{3, 1000, 10, 's'}};
    decide({entry('c', kZone0)});
    now_ms += 10 * 1000;
    EXPECT_NE(live("0"), nullptr);  // Redis: gone once past it
    now_ms += 1;
    EXPECT_EQ(live("0"), nullptr);
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, 1, bucket(1000), 0}));
}

TEST_F(WindowTest, FixedResetsAsTheNextWindowStarts)
{
    zones = {{2, 60000, 1, 'f'}};
    double w = bucket(60000);
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, 1, w, 0}));
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, 2, w, 0}));
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{1, 2, w, 1}));
    EXPECT_EQ(expire_at("0"), (w + 1) * 60000);

    // A key kept past its window (its expiry cleared) starts afresh as
    // the next window does.
    store.keys["0"].expire_at_ms = -1;
    now_ms += 60000;
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, 1, w + 1, 0}));
    EXPECT_EQ(field("0", "n"), std::to_string(static_cast<long long>(w + 1)));
    EXPECT_EQ(field("0", "t"), "1");
    EXPECT_EQ(expire_at("0"), (w + 2) * 60000);
}

// The largest window's bucket is numbered 0: a new key is no key counted
// in bucket 0 (a cost entry goes the careful path, as the hash's every
// request does), and gets its expiry time.
TEST_F(WindowTest, ANewKeyOfBucketZeroExpiresWithIt)
{
    zones = {{3, 604800000000000, 1, 'f'}};
    Entry costs = entry('w', kZone0);
    costs.costs = {1};
    EXPECT_EQ(one(decide({costs})), (V{0, 1, 0, 0}));
    EXPECT_EQ(field("0", "n"), "0");
    EXPECT_EQ(expire_at("0"), 604800000000000);
}

TEST_F(WindowTest, PeekCountsNothing)
{
    zones = {{3, 1000, 10, 's'}};
    double b = bucket(1000);
    decide({entry('c', kZone0)});
    EXPECT_EQ(one(decide({entry('p', kZone0)})), (V{0, 1, b, 0}));
    EXPECT_EQ(field("0", "t"), "1");
}

TEST_F(WindowTest, ARequestOverOneZoneCountsInNone)
{
    zones = {{1, 1000, 10, 's'}, {5, 1000, 10, 's'}};
    double b = bucket(1000);
    std::vector<ReplyElement> reply = decide({entry('c', kZones01)});
    EXPECT_EQ(reply[1].value, 0);
    EXPECT_EQ(reply[3].value, b);
    reply = decide({entry('c', kZones01)});
    EXPECT_EQ(reply[1].value, 1);  // rejected
    EXPECT_EQ(reply[2].value, 1);  // zone 0: full
    EXPECT_EQ(reply[4].value, 1);  //   and over
    EXPECT_EQ(reply[5].value, 1);  // zone 1: not counted
    EXPECT_EQ(reply[7].value, 0);
    EXPECT_EQ(field("1", "t"), "1");
}

TEST_F(WindowTest, IntervalPeekSumsTheNewestBuckets)
{
    zones = {{9, 1000, 10, 's'}};
    decide({entry('c', kZone0)});
    decide({entry('c', kZone0)});
    now_ms += 3000;
    decide({entry('c', kZone0)});
    Entry peek = entry('i', kZone0);
    peek.wanted = {1};
    std::vector<ReplyElement> reply = decide({peek});
    EXPECT_EQ(reply[2].value, 3);  // the window's count
    EXPECT_EQ(reply[5].value, 1);  // the newest bucket's
    peek.wanted = {4};
    EXPECT_EQ(decide({peek})[5].value, 3);
}

TEST_F(WindowTest, AKeyOfAnotherTypeIsTheRequestsError)
{
    zones = {{3, 1000, 10, 's'}};
    store.keys["0"] = MemoryStore::Value{false, {}, "12", -1};
    std::vector<ReplyElement> reply = decide({entry('c', kZone0)});
    EXPECT_STREQ(reply[1].error, kWrongType);
    EXPECT_EQ(reply[2].value, 0);
}

TEST_F(WindowTest, LeaseGrantsWhatIsLeft)
{
    zones = {{5, 1000, 10, 's'}};
    double b = bucket(1000);

    for (int i = 0; i < 3; i++) {
        decide({entry('c', kZone0)});
    }

    std::vector<ReplyElement> reply = decide({lease_entry(4, kZone0)});
    EXPECT_EQ(one(reply), (V{0, 5, b, 1}));
    EXPECT_EQ(reply[5].value, 2);  // granted
    reply = decide({lease_entry(1, kZone0)});
    EXPECT_EQ(one(reply), (V{1, 5, b, 1}));
    EXPECT_EQ(reply[5].value, 0);
}

}  // namespace

}  // namespace ratelimit::test
