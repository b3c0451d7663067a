// Bans (issue 43) decided against the store in memory: a zone that bans
// (kZoneEnforcedBan) bans a subject whose counted request its limit
// refuses, in the subject's side key beside its other parts, registered in
// the zone's marker; while the ban is in force every request of the
// subject there is refused uncounted, a lease grants nothing, a settle
// applies; the tail tells each ban (entry, zone, D where set now else 0,
// kToldBanWindow, ms left).
#include <string>

#include "protocol/batch_protocol.hpp"
#include "test/decide_fixture.hpp"
#include "zones/side_value.hpp"

namespace ratelimit::test {

namespace {

using V = std::vector<double>;

constexpr std::string_view kA = "rl:a+";
constexpr double kBan = 3000;

V values(const std::vector<ReplyElement> &reply, std::size_t r,
         std::size_t n)
{
    V made;

    for (std::size_t i = r; i < r + n && i < reply.size(); i++) {
        made.push_back(reply[i].value);
    }

    return made;
}

class BanTest : public DecideTest {
protected:
    void SetUp() override
    {
        zones = {{2, 1000, 1, 'f', true, false, kA, kBan}};
        marked = true;
        store.names = {"rl:a:u", "rl:a+"};
        marker();
    }

    // The marker exists, a sorted set of a member that lapses in 1 ms.
    void marker()
    {
        MemoryStore::Value &m = store.keys["rl:a+"];
        m = MemoryStore::Value{false, {{"rl:a+:v", at(1)}}, "", now_ms + 1,
                               true};
    }

    std::vector<ReplyElement> count() { return decide({entry('c', kZone0)}); }

    std::string at(double ms) const
    {
        return std::to_string(static_cast<long long>(now_ms + ms));
    }
};

}  // namespace

TEST(BanValue, TheBanPart)
{
    constexpr double kNow = 1700000000000;
    EXPECT_EQ(read_ban("b=1700000000001", kNow), 1700000000001);
    EXPECT_EQ(read_ban("o=5,1000,0;b=1700000000001;", kNow), 1700000000001);
    EXPECT_EQ(read_ban("b=1700000000000", kNow), 0);  // ended
    EXPECT_EQ(read_ban("b=x;b=1700000000001", kNow), 1700000000001);
    EXPECT_EQ(read_ban("b=1700000000000;b=1700000000001", kNow), 0);
    EXPECT_EQ(read_ban("b=9007199254740993", kNow), 9007199254740992);
    EXPECT_EQ(read_ban("b=9007199254740994", kNow), 0);  // past 2^53
    EXPECT_EQ(read_ban("b=1700000000001,1", kNow), 0);
    EXPECT_EQ(read_ban("xb=1700000000001", kNow), 0);
    EXPECT_EQ(read_ban("", kNow), 0);
}

TEST(BanValue, WithBanKeepsTheOtherParts)
{
    bool kept;
    EXPECT_EQ(with_ban("", 5, &kept), "b=5");
    EXPECT_FALSE(kept);
    EXPECT_EQ(with_ban("b=1", 5, &kept), "b=5");
    EXPECT_FALSE(kept);
    EXPECT_EQ(with_ban("o=5,1000,0;b=1;;x=2;", 7, &kept),
              "o=5,1000,0;x=2;b=7");
    EXPECT_TRUE(kept);
}

// The request its limit refuses bans the subject for kBan ms: the side key
// written and registered in the marker, the refusal told as a ban set now;
// the next request is refused by the ban, uncounted, told as in force.
TEST_F(BanTest, TheLimitsRefusalBans)
{
    EXPECT_EQ(one(count()), (V{0, 1, bucket(1000), 0}));
    EXPECT_EQ(one(count()), (V{0, 2, bucket(1000), 0}));

    std::vector<ReplyElement> reply = count();
    EXPECT_EQ(one(reply), (V{1, 2, bucket(1000), 1}));
    EXPECT_EQ(values(reply, 5, 10), (V{1, 1, kBan, kToldBanWindow, kBan}));
    EXPECT_EQ(text("rl:a+:u"), "b=" + at(kBan));
    EXPECT_EQ(expire_at("rl:a+:u"), now_ms + kBan);
    EXPECT_EQ(expire_at("rl:a+"), now_ms + kBan);

    now_ms += 1000;  // a new window: the count fits again, the ban holds
    reply = count();
    EXPECT_EQ(values(reply, 1, 2), (V{1, 0}));
    EXPECT_EQ(values(reply, 5, 10), (V{1, 1, 0, kToldBanWindow, 2000}));
    EXPECT_EQ(text("rl:a+:u"), "b=" + at(2000));  // not extended

    now_ms += 2000;  // ended (END > now no more): counted again
    reply = count();
    EXPECT_EQ(one(reply), (V{0, 1, bucket(1000), 0}));
    EXPECT_EQ(reply.size(), 5u);
}

// A ban beside an override keeps it: the key expires at the latest end
// (none where the override never lapses, the marker then kept forever).
TEST_F(BanTest, AnOverrideIsKept)
{
    store.keys["rl:a+:u"] = MemoryStore::Value{false, {}, "o=1,1000,0", -1};
    EXPECT_EQ(one(count()), (V{0, 1, bucket(1000), 0}));

    std::vector<ReplyElement> reply = count();
    EXPECT_EQ(one(reply), (V{1, 1, bucket(1000), 1}));
    EXPECT_EQ(values(reply, 5, 10),
              (V{1, 1, 1, 1000, 0, 1, 1, kBan, kToldBanWindow, kBan}));
    EXPECT_EQ(text("rl:a+:u"), "o=1,1000,0;b=" + at(kBan));
    EXPECT_EQ(expire_at("rl:a+:u"), -1);
    EXPECT_EQ(expire_at("rl:a+"), -1);
}

// Two requests of one call: the first bans, the second is refused by it.
// A lease grants nothing while banned; a settle still applies.
TEST_F(BanTest, InOneCallLeasesAndSettles)
{
    store.names = {"rl:a:u", "rl:a:u", "rl:a:u", "rl:a:u", "rl:a:u",
                   "rl:a+"};
    std::vector<ReplyElement> reply =
        decide({entry('c', kZone0), entry('c', kZone0), entry('c', kZone0),
                entry('c', kZone0), lease_entry(5, kZone0)});
    EXPECT_EQ(one(reply, 9), (V{1, 2, bucket(1000), 1}));
    EXPECT_EQ(one(reply, 13), (V{1, 2, bucket(1000), 1}));
    EXPECT_EQ(values(reply, 17, 5), (V{1, 2, bucket(1000), 1, 0}));
    EXPECT_EQ(values(reply, 22, 15),
              (V{3, 1, kBan, kToldBanWindow, kBan,
                 4, 1, 0, kToldBanWindow, kBan,
                 5, 1, 0, kToldBanWindow, kBan}));

    store.names = {"rl:a:u", "rl:a+"};
    reply = decide({settle_entry(-2, bucket(1000), kZone0)});
    EXPECT_EQ(one(reply), (V{0, 0, bucket(1000), -2}));
}

// Without a ban in force, a dry-run side zone never bans, nor a peek, nor
// a GCRA zone that does not ban; a GCRA zone that bans does.
TEST_F(BanTest, WhoBans)
{
    zones = {{1, 1000, 10, 's', false, false, kA}};
    count();
    count();
    EXPECT_EQ(text("rl:a+:u"), "");

    zones = {{1, 1000, 10, 's', true, false, kA, kBan}};
    decide({entry('p', kZone0)});
    EXPECT_EQ(text("rl:a+:u"), "");

    store.keys.clear();
    marker();
    zones = {{1, 60000, 1, 'g', true, false, kA, kBan}};
    EXPECT_EQ(count()[1].value, 0);
    EXPECT_EQ(count()[1].value, 1);
    EXPECT_EQ(text("rl:a+:u"), "b=" + at(kBan));
}

// A limit of 0 refuses without banning (a plan blocked: a ban would
// outlive its unblocking): the zone's, window or GCRA, and an override's
// of 0 on a zone above it; an override above 0 on a zone of 0 bans as its
// limit refuses.
TEST_F(BanTest, ALimitOf0DoesNotBan)
{
    zones = {{0, 1000, 1, 'f', true, false, kA, kBan}};
    EXPECT_EQ(one(count()), (V{1, 0, 0, 1}));  // no key: oldest 0
    EXPECT_EQ(text("rl:a+:u"), "");

    zones = {{0, 60000, 1, 'g', true, false, kA, kBan}};
    EXPECT_EQ(count()[1].value, 1);
    EXPECT_EQ(text("rl:a+:u"), "");

    zones = {{2, 1000, 1, 'f', true, false, kA, kBan}};
    store.keys["rl:a+:u"] = MemoryStore::Value{false, {}, "o=0,1000,0", -1};
    EXPECT_EQ(one(count()), (V{1, 0, 0, 1}));
    EXPECT_EQ(text("rl:a+:u"), "o=0,1000,0");

    zones = {{0, 1000, 1, 'f', true, false, kA, kBan}};
    store.keys["rl:a+:u"] = MemoryStore::Value{false, {}, "o=1,1000,0", -1};
    EXPECT_EQ(one(count()), (V{0, 1, bucket(1000), 0}));
    EXPECT_EQ(one(count()), (V{1, 1, bucket(1000), 1}));
    EXPECT_EQ(text("rl:a+:u"), "o=1,1000,0;b=" + at(kBan));
}

}  // namespace ratelimit::test
