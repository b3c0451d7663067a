// Side keys decided against the store in memory: a request of a side-mode
// zone names its subject's side key (numbered after the call's count
// keys), whose override, in force, replaces the zone's limit for that use
// of it, and whose L, W and X - now end the request's reply.
#include <string>

#include "test/decide_fixture.hpp"

namespace ratelimit::test {

namespace {

using V = std::vector<double>;

// The 3 reply elements of an override from element `r`.
V triple(const std::vector<ReplyElement> &reply, std::size_t r)
{
    return {reply[r].value, reply[r + 1].value, reply[r + 2].value};
}

const V kNone{-1, 0, 0};

class SideKeysTest : public DecideTest {
protected:
    // Side key `key` (a string) holds `value`.
    void side(const std::string &key, const std::string &value)
    {
        store.keys[key] = MemoryStore::Value{false, {}, value, -1};
    }

    // The ms of now_ms + `ms` as text.
    std::string at(double ms) const
    {
        return std::to_string(static_cast<long long>(now_ms + ms));
    }

    // A counted request of zone 0 (its side key "1"): its reply.
    std::vector<ReplyElement> count() { return decide({entry('c', kZone0)}); }
};

TEST_F(SideKeysTest, AWindowTakesTheOverridesLimit)
{
    zones = {{5, 1000, 10, 's', true, true, true}};
    side("1", "o=2,60000,0");

    for (double n = 1; n <= 2; n++) {
        std::vector<ReplyElement> reply = count();
        ASSERT_EQ(reply.size(), 8u);
        EXPECT_EQ(one(reply), (V{0, n, bucket(1000), 0}));
        EXPECT_EQ(triple(reply, 5), (V{2, 60000, 0}));
    }

    EXPECT_EQ(one(count()), (V{1, 2, bucket(1000), 1}));
}

// Without an override in force the zone's own limit holds (the fast path
// of a packed string), and the reply still ends with -1, 0, 0.
TEST_F(SideKeysTest, NoOverrideLeavesTheLimit)
{
    zones = {{3, 1000, 10, 's', true, true, true}};

    for (const std::string &value : {std::string("o=x"),
                                     std::string("o=9,0,0"),
                                     "o=9,60000," + at(0)})
    {
        side("1", value);
        std::vector<ReplyElement> reply = count();
        ASSERT_EQ(reply.size(), 8u);
        EXPECT_EQ(reply[1].value, 0) << value;
        EXPECT_EQ(triple(reply, 5), kNone) << value;
    }

    store.keys.erase("1");
    std::vector<ReplyElement> reply = count();
    EXPECT_EQ(one(reply), (V{1, 3, bucket(1000), 1}));
    EXPECT_EQ(triple(reply, 5), kNone);
}

// In force until X, told as the ms left: at X it has lapsed.
TEST_F(SideKeysTest, LapsesAtItsTime)
{
    zones = {{1, 1000, 10, 's', true, true, true}};
    side("1", "o=3,60000," + at(1));
    EXPECT_EQ(triple(count(), 5), (V{3, 60000, 1}));
    EXPECT_EQ(count()[1].value, 0);  // 2 of 3

    now_ms += 1;
    std::vector<ReplyElement> reply = count();
    EXPECT_EQ(reply[1].value, 1);  // 2 over 1
    EXPECT_EQ(triple(reply, 5), kNone);
}

// The first part of the form is the override, out of bounds or not.
TEST_F(SideKeysTest, TheFirstPartOfTheForm)
{
    zones = {{5, 1000, 10, 's', true, false, true}};
    side("1", "x=1;o=x;o=1,60000,0");
    EXPECT_EQ(triple(count(), 5), (V{1, 60000, 0}));
    EXPECT_EQ(count()[1].value, 1);

    side("1", "o=1,60000,99999999999999999999;o=1,60000,0");
    std::vector<ReplyElement> reply = count();
    EXPECT_EQ(one(reply), (V{0, 2, bucket(1000), 0}));
    EXPECT_EQ(triple(reply, 5), kNone);
}

// A side key of another type is no override, not the request's error.
TEST_F(SideKeysTest, AHashIsNoOverride)
{
    zones = {{1, 60000, 1, 'f', true, true, true}};
    store.keys["1"] = MemoryStore::Value{true, {{"o", "0"}}, "", -1};
    std::vector<ReplyElement> reply = count();
    EXPECT_EQ(reply[1].error, nullptr);
    EXPECT_EQ(one(reply), (V{0, 1, bucket(60000), 0}));
    EXPECT_EQ(triple(reply, 5), kNone);
}

// Limit 0: every request is over, rejected where enforced.
TEST_F(SideKeysTest, LimitZeroOnAWindow)
{
    zones = {{5, 1000, 10, 's', true, false, true},
             {5, 1000, 10, 's', false, false, true}};
    side("2", "o=0,60000,0");
    side("3", "o=0,60000,0");
    std::vector<ReplyElement> reply = decide({entry('c', kZone0),
                                              entry('c', kZone1)});
    EXPECT_EQ(one(reply), (V{1, 0, 0, 1}));
    EXPECT_EQ(triple(reply, 5), (V{0, 60000, 0}));
    EXPECT_EQ(one(reply, 8), (V{0, 0, 0, 1}));  // dry run
    EXPECT_EQ(triple(reply, 12), (V{0, 60000, 0}));
    EXPECT_EQ(live("0"), nullptr);
}

// A GCRA zone of 10 a second (T = 100000 us) and a capacity of 3.
class SideGcraTest : public SideKeysTest {
protected:
    void SetUp() override { zones = {{10, 1000, 3, 'g', true, true, true}}; }

    static constexpr double kT = 100000;
};

// 5 a second: each request moves the TAT 200000 us; the capacity stays
// 3 turns.
TEST_F(SideGcraTest, ASlowerInterval)
{
    side("1", "o=5,1000,0");

    for (double n = 1; n <= 3; n++) {
        EXPECT_EQ(one(count()), (V{0, n * 2 * kT, 0, 0}));
    }

    EXPECT_EQ(one(count()), (V{1, 6 * kT, 0, 1}));
}

TEST_F(SideGcraTest, AFasterInterval)
{
    side("1", "o=20,1000,0");

    for (double n = 1; n <= 3; n++) {
        EXPECT_EQ(one(count()), (V{0, n * kT / 2, 0, 0}));
    }

    std::vector<ReplyElement> reply = count();
    EXPECT_EQ(one(reply), (V{1, 3 * kT / 2, 0, 1}));
    EXPECT_EQ(triple(reply, 5), (V{20, 1000, 0}));
}

// Limit 0 rejects every request; a settle moves the TAT by the zone's
// own interval.
TEST_F(SideGcraTest, LimitZeroBlocksAndSettlesByItsOwnInterval)
{
    count();
    count();
    side("1", "o=0,1000,0");
    EXPECT_EQ(one(count()), (V{1, 2 * kT, 0, 1}));

    std::vector<ReplyElement> reply = decide({settle_entry(-1, 0, kZone0)});
    EXPECT_EQ(one(reply), (V{0, kT, 0, -1}));
    EXPECT_EQ(triple(reply, 5), (V{0, 1000, 0}));
}

// A settle turns the TAT by the overridden interval.
TEST_F(SideGcraTest, ASettleUnderAnOverride)
{
    side("1", "o=5,1000,0");
    count();
    count();
    std::vector<ReplyElement> reply = decide({settle_entry(-1, 0, kZone0)});
    EXPECT_EQ(one(reply), (V{0, 2 * kT, 0, -1}));
    EXPECT_EQ(triple(reply, 5), (V{5, 1000, 0}));
}

// A lease grants what is left of the override's limit.
TEST_F(SideKeysTest, ALeaseUnderAnOverride)
{
    zones = {{10, 1000, 10, 's', true, false, true}};
    side("1", "o=3,60000," + at(5000));
    std::vector<ReplyElement> reply = decide({lease_entry(5, kZone0)});
    ASSERT_EQ(reply.size(), 9u);
    EXPECT_EQ(one(reply), (V{0, 3, bucket(1000), 1}));
    EXPECT_EQ(reply[5].value, 3);  // granted
    EXPECT_EQ(triple(reply, 6), (V{3, 60000, 5000}));
    EXPECT_EQ(decide({lease_entry(5, kZone0)})[5].value, 0);
}

// One request of two side zones, each under its own override: each zone
// takes its own, and the reply ends with both in the zones' order.
TEST_F(SideKeysTest, TwoZonesTwoOverrides)
{
    zones = {{5, 1000, 10, 's', true, false, true},
             {5, 60000, 1, 'f', true, false, true}};
    side("2", "o=2,10000,0");
    side("3", "o=1,60000," + at(30000));
    std::vector<ReplyElement> reply = decide({entry('c', kZones01)});
    ASSERT_EQ(reply.size(), 14u);
    EXPECT_EQ(reply[1].value, 0);
    EXPECT_EQ(triple(reply, 8), (V{2, 10000, 0}));
    EXPECT_EQ(triple(reply, 11), (V{1, 60000, 30000}));

    reply = decide({entry('c', kZones01)});
    EXPECT_EQ(reply[1].value, 1);  // the fixed zone's 1
    EXPECT_EQ(reply[4].value, 0);  // 2 fits the sliding zone's 2
    EXPECT_EQ(reply[7].value, 1);
}

// Only the side zones of a request name side keys, after all the count
// keys: a request of a side zone and another, then one of the other alone
// (on the same key, "b"), its count key before the side key.
TEST_F(SideKeysTest, OnlySideZonesNameSideKeys)
{
    zones = {{5, 1000, 10, 's', true, false, true},
             {1, 1000, 10, 's', true, false, false}};
    store.names = {"a", "b", "b", "s"};
    side("s", "o=1,1000,0");
    std::vector<ReplyElement> reply = decide({entry('c', kZones01),
                                              entry('c', kZone1)});
    ASSERT_EQ(reply.size(), 1u + 10 + 4);
    EXPECT_EQ(triple(reply, 8), (V{1, 1000, 0}));
    EXPECT_EQ(one(reply, 11), (V{1, 1, bucket(1000), 1}));
}

// A request that fails ends with its overrides as if decided.
TEST_F(SideKeysTest, AFailedRequestStillTellsItsOverride)
{
    zones = {{5, 1000, 10, 's', true, false, true}};
    side("1", "o=2,60000,0");
    Entry failed = lease_entry(5, kZone0);
    failed.error = "ERR ratelimit: malformed lease";
    std::vector<ReplyElement> reply = decide({failed});
    EXPECT_STREQ(reply[1].error, failed.error);
    EXPECT_EQ(V({reply[2].value, reply[3].value, reply[4].value,
                 reply[5].value}),
              (V{0, 0, 0, 0}));
    EXPECT_EQ(triple(reply, 6), (V{2, 60000, 0}));
}

}  // namespace

}  // namespace ratelimit::test
