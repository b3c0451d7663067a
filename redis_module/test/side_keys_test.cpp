// Side keys decided against the store in memory: a use of a side zone
// reads its subject's side key, made from the count key, where the zone's
// marker key exists (or the call names none); an override in force
// replaces the zone's limit for that use, and is told in the tail after
// the last request's reply (entry, zone, L, W, ms left).
#include <cstdint>
#include <string>

#include "test/decide_fixture.hpp"

namespace ratelimit::test {

namespace {

using V = std::vector<double>;

// The reply's elements from `r` on (the tail, after the requests'), or
// `n` of them.
V tail(const std::vector<ReplyElement> &reply, std::size_t r,
       std::size_t n = SIZE_MAX)
{
    V values;

    for (std::size_t i = r; i < reply.size() && i - r < n; i++) {
        values.push_back(reply[i].value);
    }

    return values;
}

// Side key bases of zones "a" and "b", and their count keys of subject u.
constexpr std::string_view kA = "rl:a+";
constexpr std::string_view kB = "rl:b+";

class SideKeysTest : public DecideTest {
protected:
    void SetUp() override { store.names = {"rl:a:u"}; }

    // String key `key` holds `value`.
    void side(const std::string &key, const std::string &value)
    {
        store.keys[key] = MemoryStore::Value{false, {}, value, -1};
    }

    // The ms of now_ms + `ms` as text.
    std::string at(double ms) const
    {
        return std::to_string(static_cast<long long>(now_ms + ms));
    }

    // A counted request of zone 0 on "rl:a:u": its reply.
    std::vector<ReplyElement> count() { return decide({entry('c', kZone0)}); }
};

TEST_F(SideKeysTest, AWindowTakesTheOverridesLimit)
{
    zones = {{5, 1000, 10, 's', true, true, kA}};
    side("rl:a+:u", "o=2,60000,0");

    for (double n = 1; n <= 2; n++) {
        std::vector<ReplyElement> reply = count();
        ASSERT_EQ(reply.size(), 5u + 5);
        EXPECT_EQ(one(reply), (V{0, n, bucket(1000), 0}));
        EXPECT_EQ(tail(reply, 5), (V{1, 1, 2, 60000, 0}));
    }

    EXPECT_EQ(one(count()), (V{1, 2, bucket(1000), 1}));
}

// Without an override in force the zone's own limit holds (the fast path
// of a packed string), and nothing is told.
TEST_F(SideKeysTest, NoOverrideLeavesTheLimit)
{
    zones = {{3, 1000, 10, 's', true, true, kA}};

    for (const std::string &value : {std::string("o=x"),
                                     std::string("o=9,0,0"),
                                     "o=9,60000," + at(0)})
    {
        side("rl:a+:u", value);
        std::vector<ReplyElement> reply = count();
        ASSERT_EQ(reply.size(), 5u) << value;
        EXPECT_EQ(reply[1].value, 0) << value;
    }

    store.keys.erase("rl:a+:u");
    std::vector<ReplyElement> reply = count();
    ASSERT_EQ(reply.size(), 5u);
    EXPECT_EQ(one(reply), (V{1, 3, bucket(1000), 1}));
}

// In force until X, told as the ms left: at X it has lapsed.
TEST_F(SideKeysTest, LapsesAtItsTime)
{
    zones = {{1, 1000, 10, 's', true, true, kA}};
    side("rl:a+:u", "o=3,60000," + at(1));
    EXPECT_EQ(tail(count(), 5), (V{1, 1, 3, 60000, 1}));
    EXPECT_EQ(count()[1].value, 0);  // 2 of 3

    now_ms += 1;
    std::vector<ReplyElement> reply = count();
    EXPECT_EQ(reply[1].value, 1);  // 2 over 1
    EXPECT_EQ(reply.size(), 5u);
}

// The first part of the form is the override, out of bounds or not.
TEST_F(SideKeysTest, TheFirstPartOfTheForm)
{
    zones = {{5, 1000, 10, 's', true, false, kA}};
    side("rl:a+:u", "x=1;o=x;o=1,60000,0");
    EXPECT_EQ(tail(count(), 5), (V{1, 1, 1, 60000, 0}));
    EXPECT_EQ(count()[1].value, 1);

    side("rl:a+:u", "o=1,60000,99999999999999999999;o=1,60000,0");
    std::vector<ReplyElement> reply = count();
    EXPECT_EQ(one(reply), (V{0, 2, bucket(1000), 0}));
    EXPECT_EQ(reply.size(), 5u);
}

// A side key of another type is no override, not the request's error.
TEST_F(SideKeysTest, AHashIsNoOverride)
{
    zones = {{1, 60000, 1, 'f', true, true, kA}};
    store.keys["rl:a+:u"] = MemoryStore::Value{true, {{"o", "0"}}, "", -1};
    std::vector<ReplyElement> reply = count();
    EXPECT_EQ(reply[1].error, nullptr);
    EXPECT_EQ(one(reply), (V{0, 1, bucket(60000), 0}));
    EXPECT_EQ(reply.size(), 5u);
}

// A hashed subject's count key and a tagged one: the side key is the base
// and the key from the zone name's end on.
TEST_F(SideKeysTest, HashedAndTaggedKeys)
{
    zones = {{5, 1000, 10, 's', true, false, "rl:z+"}};
    store.names = {"rl:z#abc", "rl:z:{0a1b2c3d}u"};
    side("rl:z+#abc", "o=1,1000,0");
    side("rl:z+:{0a1b2c3d}u", "o=2,1000,0");
    std::vector<ReplyElement> reply = decide({entry('c', kZone0),
                                              entry('c', kZone0)});
    EXPECT_EQ(tail(reply, 9), (V{1, 1, 1, 1000, 0, 2, 1, 2, 1000, 0}));
}

// Limit 0 of a window zone: need > 0 - count, rejected where enforced;
// nothing more (a count below 0, of a hand-edited hash, lets 1 in).
TEST_F(SideKeysTest, LimitZeroOnAWindow)
{
    zones = {{5, 1000, 10, 's', true, false, kA},
             {5, 1000, 10, 's', false, false, kB},
             {5, 60000, 1, 'f', true, false, kA}};
    store.names = {"rl:a:u", "rl:b:u", "rl:a:v"};
    side("rl:a+:u", "o=0,60000,0");
    side("rl:b+:u", "o=0,60000,0");
    side("rl:a+:v", "o=0,60000,0");
    std::string minute = std::to_string(
        static_cast<long long>(bucket(60000)));
    store.keys["rl:a:v"] = MemoryStore::Value{
        true, {{"t", "-1"}, {"n", minute}}, "", -1};
    std::vector<ReplyElement> reply = decide(
        {entry('c', kZone0), entry('c', kZone1),
         entry('c', std::string_view("\2", 1))});
    EXPECT_EQ(one(reply), (V{1, 0, 0, 1}));
    EXPECT_EQ(one(reply, 5), (V{0, 0, 0, 1}));  // dry run
    EXPECT_EQ(one(reply, 9), (V{0, 0, bucket(60000), 0}));
    EXPECT_EQ(tail(reply, 13), (V{1, 1, 0, 60000, 0, 2, 1, 0, 60000, 0,
                                  3, 1, 0, 60000, 0}));
    EXPECT_EQ(live("rl:a:u"), nullptr);
}

// A side zone of limit 0 (nginx's limit=$var of 0): a subject under an
// override is decided by it; any other is rejected, nothing counted, the
// count as its key holds it (dry run: not rejected, over); a peek over, a
// lease granted nothing; a settle applied as to any window.
TEST_F(SideKeysTest, LimitZeroAdmitsOnlyUnderAnOverride)
{
    zones = {{0, 1000, 10, 's', true, true, kA},
             {0, 60000, 1, 'f', false, false, kA}};
    store.names = {"rl:a:u", "rl:a:v", "rl:a:u", "rl:a:v", "rl:a:v",
                   "rl:a:v", "rl:a:v"};
    side("rl:a+:u", "o=1,60000,0");
    double b = bucket(1000);
    std::vector<ReplyElement> reply = decide(
        {entry('c', kZone0), entry('c', kZone0), entry('c', kZone0),
         entry('c', kZone1), entry('p', kZone0), lease_entry(2, kZone0),
         settle_entry(2, b, kZone0)});
    ASSERT_EQ(reply.size(), 1u + 6 * 4 + 5 + 10);
    EXPECT_EQ(one(reply, 1), (V{0, 1, b, 0}));   // u: its override's 1
    EXPECT_EQ(one(reply, 5), (V{1, 0, 0, 1}));   // v: none, rejected
    EXPECT_EQ(one(reply, 9), (V{1, 1, b, 1}));   // u: 2 over 1
    EXPECT_EQ(one(reply, 13), (V{0, 0, 0, 1}));  // v, dry run: over
    EXPECT_EQ(one(reply, 17), (V{1, 0, 0, 1}));  // v: a peek
    EXPECT_EQ(one(reply, 21), (V{1, 0, 0, 1}));  // v: a lease of 2...
    EXPECT_EQ(reply[25].value, 0);               // ...granted none
    EXPECT_EQ(one(reply, 26), (V{0, 2, b, 2}));  // v: a settle of 2
    EXPECT_EQ(tail(reply, 30), (V{1, 1, 1, 60000, 0, 3, 1, 1, 60000, 0}));
    EXPECT_NE(text("rl:a:v"), "");               // the settle's bucket
}

// A GCRA side zone of limit 0: rejected but under an override; a settle
// moves the TAT by the interval of limit 1 (1000000 us a second).
TEST_F(SideKeysTest, LimitZeroOnAGcraZone)
{
    zones = {{0, 1000, 3, 'g', true, true, kA}};
    store.names = {"rl:a:u", "rl:a:v", "rl:a:v", "rl:a:u"};
    side("rl:a+:u", "o=10,1000,0");
    std::vector<ReplyElement> reply = decide(
        {entry('c', kZone0), entry('c', kZone0), settle_entry(1, 0, kZone0),
         settle_entry(-1, 0, kZone0)});
    ASSERT_EQ(reply.size(), 1u + 4 * 4 + 10);
    EXPECT_EQ(one(reply, 1), (V{0, 100000, 0, 0}));
    EXPECT_EQ(one(reply, 5), (V{1, 0, 0, 1}));
    EXPECT_EQ(one(reply, 9), (V{0, 1000000, 0, 1}));
    EXPECT_EQ(one(reply, 13), (V{0, 0, 0, -1}));  // the override's turn
    EXPECT_EQ(tail(reply, 17), (V{1, 1, 10, 1000, 0, 4, 1, 10, 1000, 0}));
    EXPECT_EQ(one(decide({entry('c', kZone0)}), 1), (V{0, 100000, 0, 0}));

    store.names = {"rl:a:v"};
    EXPECT_EQ(one(count()), (V{1, 1000000, 0, 1}));
}

// With marker keys (after the count keys, one a side zone in the zones'
// order), a zone reads its side keys only where its marker exists, of
// any type.
TEST_F(SideKeysTest, MarkersGateTheReads)
{
    zones = {{1, 1000, 10, 's', true, false, kA},
             {1, 1000, 10, 's', true, false},
             {1, 1000, 10, 's', true, false, kB}};
    marked = true;
    store.names = {"rl:a:u", "rl:b:u", "mark a", "mark b"};
    side("rl:a+:u", "o=5,1000,0");
    side("rl:b+:u", "o=5,1000,0");
    std::string_view zones02("\0\2", 2);

    std::vector<ReplyElement> reply = decide({entry('c', zones02)});
    ASSERT_EQ(reply.size(), 1u + 7);
    EXPECT_EQ(one(reply), (V{0, 1, bucket(1000), 0}));

    store.keys["mark b"] = MemoryStore::Value{true, {{"x", "1"}}, "", -1};
    reply = decide({entry('c', zones02)});
    EXPECT_EQ(reply[1].value, 1);  // zone 0's own 1
    EXPECT_EQ(tail(reply, 8), (V{1, 2, 5, 1000, 0}));

    // Without markers every side zone reads.
    marked = false;
    store.names = {"rl:a:u", "rl:b:u"};
    reply = decide({entry('c', zones02)});
    EXPECT_EQ(reply[1].value, 0);
    EXPECT_EQ(tail(reply, 8), (V{1, 1, 5, 1000, 0, 1, 2, 5, 1000, 0}));
}

// Two zones of one request, each under its own override: each takes its
// own, told in the zones' order after every request's reply.
TEST_F(SideKeysTest, TwoZonesTwoOverrides)
{
    zones = {{5, 1000, 10, 's', true, false, kA},
             {5, 60000, 1, 'f', true, false, kB}};
    store.names = {"rl:a:u", "rl:b:u", "rl:x"};
    side("rl:a+:u", "o=2,10000,0");
    side("rl:b+:u", "o=1,60000," + at(30000));
    std::vector<ReplyElement> reply = decide({entry('c', kZones01),
                                              entry('p', kZone0)});
    ASSERT_EQ(reply.size(), 1u + 7 + 4 + 10);
    EXPECT_EQ(reply[1].value, 0);
    EXPECT_EQ(tail(reply, 12), (V{1, 1, 2, 10000, 0, 1, 2, 1, 60000, 30000}));

    reply = decide({entry('c', kZones01)});
    EXPECT_EQ(reply[1].value, 1);  // the fixed zone's 1
    EXPECT_EQ(reply[4].value, 0);  // 2 fits the sliding zone's 2
    EXPECT_EQ(reply[7].value, 1);
}

// A side key is read once a call, by its count key's name whatever zone
// asks (the script's cache): zone 1's use of "rl:a:u" takes zone 0's.
TEST_F(SideKeysTest, ReadOnceByCountKey)
{
    zones = {{5, 1000, 10, 's', true, false, kA},
             {5, 1000, 10, 's', true, false, kB}};
    store.names = {"rl:a:u", "rl:a:u"};
    side("rl:a+:u", "o=1,1000,0");
    side("rl:b+:u", "o=7,1000,0");
    std::vector<ReplyElement> reply = decide({entry('c', kZone0),
                                              entry('c', kZone1)});
    EXPECT_EQ(one(reply, 5), (V{1, 1, bucket(1000), 1}));
    EXPECT_EQ(tail(reply, 9), (V{1, 1, 1, 1000, 0, 2, 1, 1, 1000, 0}));
}

// An entry that fails tells its overrides: a lease of two zones, and a
// malformed settle, whose zone is its last byte.
TEST_F(SideKeysTest, AFailedEntryStillTellsItsOverrides)
{
    zones = {{5, 1000, 10, 's', true, false, kA},
             {5, 1000, 10, 's', true, false, kB}};
    store.names = {"rl:a:u", "rl:b:u", "rl:b:u"};
    side("rl:a+:u", "o=2,60000,0");
    side("rl:b+:u", "o=3,60000,0");
    Entry lease = lease_entry(5, kZones01);
    lease.error = "ERR ratelimit: a lease is of one zone";
    Entry settle = settle_entry(0, 0, kZone1);
    settle.error = "ERR ratelimit: malformed settle";
    std::vector<ReplyElement> reply = decide({lease, settle});
    ASSERT_EQ(reply.size(), 1u + 8 + 4 + 15);
    EXPECT_STREQ(reply[1].error, lease.error);
    EXPECT_EQ(tail(reply, 2, 7), (V{0, 0, 0, 0, 0, 0, 0}));
    EXPECT_STREQ(reply[9].error, settle.error);
    EXPECT_EQ(tail(reply, 13), (V{1, 1, 2, 60000, 0, 1, 2, 3, 60000, 0,
                                  2, 1, 3, 60000, 0}));
}

// A lease grants what is left of the override's limit.
TEST_F(SideKeysTest, ALeaseUnderAnOverride)
{
    zones = {{10, 1000, 10, 's', true, false, kA}};
    side("rl:a+:u", "o=3,60000," + at(5000));
    std::vector<ReplyElement> reply = decide({lease_entry(5, kZone0)});
    ASSERT_EQ(reply.size(), 6u + 5);
    EXPECT_EQ(one(reply), (V{0, 3, bucket(1000), 1}));
    EXPECT_EQ(reply[5].value, 3);  // granted
    EXPECT_EQ(tail(reply, 6), (V{1, 1, 3, 60000, 5000}));
    EXPECT_EQ(decide({lease_entry(5, kZone0)})[5].value, 0);
}

// A settle of a window under an override: its count against limit L.
TEST_F(SideKeysTest, AWindowSettleUnderAnOverride)
{
    zones = {{10, 60000, 1, 'f', true, false, kA}};
    store.names = {"rl:a:u", "rl:a:u"};
    side("rl:a+:u", "o=2,60000,0");
    count();
    count();
    EXPECT_EQ(one(count()), (V{1, 2, bucket(60000), 1}));
    std::vector<ReplyElement> reply =
        decide({settle_entry(-1, bucket(60000), kZone0), entry('c', kZone0)});
    EXPECT_EQ(one(reply), (V{0, 1, bucket(60000), -1}));
    EXPECT_EQ(one(reply, 5), (V{0, 2, bucket(60000), 0}));
    EXPECT_EQ(tail(reply, 9), (V{1, 1, 2, 60000, 0, 2, 1, 2, 60000, 0}));
}

// A GCRA zone of 10 a second (T = 100000 us) and a capacity of 3.
class SideGcraTest : public SideKeysTest {
protected:
    void SetUp() override
    {
        SideKeysTest::SetUp();
        zones = {{10, 1000, 3, 'g', true, true, kA}};
    }

    static constexpr double kT = 100000;
};

// 5 a second: each request moves the TAT 200000 us; the capacity stays
// 3 turns.
TEST_F(SideGcraTest, ASlowerInterval)
{
    side("rl:a+:u", "o=5,1000,0");

    for (double n = 1; n <= 3; n++) {
        EXPECT_EQ(one(count()), (V{0, n * 2 * kT, 0, 0}));
    }

    EXPECT_EQ(one(count()), (V{1, 6 * kT, 0, 1}));
}

TEST_F(SideGcraTest, AFasterInterval)
{
    side("rl:a+:u", "o=20,1000,0");

    for (double n = 1; n <= 3; n++) {
        EXPECT_EQ(one(count()), (V{0, n * kT / 2, 0, 0}));
    }

    std::vector<ReplyElement> reply = count();
    EXPECT_EQ(one(reply), (V{1, 3 * kT / 2, 0, 1}));
    EXPECT_EQ(tail(reply, 5), (V{1, 1, 20, 1000, 0}));
}

// Limit 0 rejects every request, even on an empty TAT; a settle moves the
// TAT by the zone's own interval.
TEST_F(SideGcraTest, LimitZeroRefusesAllAndSettlesByItsOwnInterval)
{
    store.names = {"rl:a:u", "rl:a:v"};
    side("rl:a+:v", "o=0,1000,0");
    EXPECT_EQ(one(decide({entry('c', kZone0), entry('c', kZone0)}), 5),
              (V{1, 0, 0, 1}));

    count();
    side("rl:a+:u", "o=0,1000,0");
    EXPECT_EQ(one(count()), (V{1, 2 * kT, 0, 1}));

    std::vector<ReplyElement> reply = decide({settle_entry(-1, 0, kZone0)});
    EXPECT_EQ(one(reply), (V{0, kT, 0, -1}));
    EXPECT_EQ(tail(reply, 5), (V{1, 1, 0, 1000, 0}));
}

// A settle turns the TAT by the overridden interval.
TEST_F(SideGcraTest, ASettleUnderAnOverride)
{
    side("rl:a+:u", "o=5,1000,0");
    count();
    count();
    std::vector<ReplyElement> reply = decide({settle_entry(-1, 0, kZone0)});
    EXPECT_EQ(one(reply), (V{0, 2 * kT, 0, -1}));
    EXPECT_EQ(tail(reply, 5), (V{1, 1, 5, 1000, 0}));
}

}  // namespace

}  // namespace ratelimit::test
