#include "cluster/cluster_slot.hpp"

#include <deque>
#include <initializer_list>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

TEST(ClusterSlot, Crc16OfTheSpecificationsCheckString)
{
    EXPECT_EQ(crc16_xmodem("123456789"), 0x31c3);
    EXPECT_EQ(crc16_xmodem(""), 0);
}

TEST(ClusterSlot, SlotsAsRedisComputesThem)
{
    // CLUSTER KEYSLOT answers for these on Redis 7.0.
    EXPECT_EQ(key_slot("foo"), 12182);
    EXPECT_EQ(key_slot("bar"), 5061);
    EXPECT_EQ(key_slot("hello"), 866);
}

// Every slot has a tag, of at most kSlotTagMaxSize digits, whose key is in
// it whatever comes before and after the braces.
TEST(ClusterSlot, EverySlotHasATag)
{
    for (std::uint16_t slot = 0; slot < kClusterSlots; slot++) {
        char tag[kSlotTagMaxSize];
        std::size_t n = write_slot_tag(slot, tag);
        ASSERT_GT(n, 0u);
        ASSERT_LE(n, kSlotTagMaxSize);
        ASSERT_EQ(key_slot("rl:api+{" + std::string(tag, n) + "}"), slot)
            << slot;
    }
}

TEST(ClusterSlot, HashTags)
{
    EXPECT_EQ(key_slot("{user1000}.following"),
              key_slot("{user1000}.followers"));
    EXPECT_EQ(key_slot("rl:api:{k1}"), key_slot("k1"));
    EXPECT_EQ(key_slot("rl:login:{k1}"), key_slot("k1"));
    // The first '{' and the next '}': "{bar" here.
    EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));
    EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
    // An empty tag hashes the whole key; so does an unclosed one.
    EXPECT_EQ(key_slot("foo{}{bar}"), crc16_xmodem("foo{}{bar}") % 16384);
    EXPECT_EQ(key_slot("foo{bar"), crc16_xmodem("foo{bar") % 16384);
    std::string binary("a{\0\xff}b", 6);
    EXPECT_EQ(key_slot(binary), key_slot(std::string("\0\xff", 2)));
}

// Reply trees for CLUSTER SLOTS, owned by the fixture.  An array holds
// copies of the replies it is made of, in a row.
class Replies {
public:
    const Reply *integer(long long v)
    {
        Reply *r = make(Reply::Type::kInteger);
        r->integer = v;
        return r;
    }

    const Reply *string(const char *s)
    {
        Reply *r = make(Reply::Type::kString);
        r->text = s;
        return r;
    }

    const Reply *error(const char *s)
    {
        Reply *r = make(Reply::Type::kError);
        r->text = s;
        return r;
    }

    const Reply *array(std::initializer_list<const Reply *> items)
    {
        return array_of(items);
    }

    const Reply *array_of(const std::vector<const Reply *> &items)
    {
        std::vector<Reply> &row = arrays_.emplace_back();
        for (const Reply *item : items) {
            row.push_back(*item);
        }
        Reply *r = make(Reply::Type::kArray);
        r->element = row.data();
        r->elements = row.size();
        return r;
    }

    const Reply *range(long long first, long long last, const char *host,
                       long long port)
    {
        return array({integer(first), integer(last),
                      array({string(host), integer(port), string("id")})});
    }

    // A host name of its own, kept with the replies.
    const char *host(std::string name)
    {
        hosts_.push_back(std::move(name));
        return hosts_.back().c_str();
    }

private:
    Reply *make(Reply::Type type)
    {
        Reply &r = replies_.emplace_back();
        r.type = type;
        return &r;
    }

    std::deque<Reply> replies_;
    std::deque<std::vector<Reply>> arrays_;
    std::deque<std::string> hosts_;
};

TEST(SlotMap, LoadsMastersOfEachRange)
{
    Replies r;
    SlotMap map;

    ASSERT_TRUE(map.load(r.array({r.range(0, 99, "127.0.0.1", 7000),
                                  r.range(5461, 10922, "127.0.0.1", 7001),
                                  r.range(10923, 16383, "127.0.0.1", 7002),
                                  r.range(100, 5460, "127.0.0.1", 7000)})));
    ASSERT_EQ(map.nodes().size(), 3u);
    EXPECT_EQ(map.nodes()[map.node_of(0)].port, 7000);
    EXPECT_EQ(map.nodes()[map.node_of(5461)].port, 7001);
    EXPECT_EQ(map.nodes()[map.node_of(16383)].port, 7002);
    EXPECT_EQ(map.find("127.0.0.1", 7001), map.node_of(10922));
}

TEST(SlotMap, UncoveredSlotsHaveNoNode)
{
    Replies r;
    SlotMap map;

    EXPECT_EQ(map.node_of(5), SlotMap::kNoNode);
    ASSERT_TRUE(map.load(r.array({r.range(0, 10, "10.0.0.1", 6379)})));
    EXPECT_EQ(map.node_of(11), SlotMap::kNoNode);
}

TEST(SlotMap, MalformedReplyKeepsTheMap)
{
    Replies r;
    SlotMap map;

    ASSERT_TRUE(map.load(r.array({r.range(0, 16383, "10.0.0.1", 6379)})));
    EXPECT_FALSE(map.load(r.string("ERR")));
    EXPECT_FALSE(map.load(r.array({r.range(10, 5, "10.0.0.2", 6379)})));
    EXPECT_FALSE(map.load(r.array({r.range(0, 16384, "10.0.0.2", 6379)})));
    EXPECT_FALSE(map.load(r.array({r.range(0, 1, "10.0.0.2", 0)})));
    EXPECT_FALSE(map.load(r.array({r.array({r.integer(0)})})));
    EXPECT_EQ(map.nodes()[map.node_of(77)].host, "10.0.0.1");
}

TEST(SlotMap, MovedSlotGoesToItsNewNode)
{
    Replies r;
    SlotMap map;

    ASSERT_TRUE(map.load(r.array({r.range(0, 8000, "10.0.0.1", 6379),
                                  r.range(8001, 16383, "10.0.0.2", 6380)})));
    ASSERT_TRUE(map.move(3999, "10.0.0.2", 6380));
    EXPECT_EQ(map.nodes()[map.node_of(3999)].host, "10.0.0.2");
    EXPECT_EQ(map.nodes()[map.node_of(4000)].host, "10.0.0.1");
    ASSERT_TRUE(map.move(4000, "10.0.0.2", 6380));
    EXPECT_EQ(map.nodes().size(), 2u);
}

// A MOVED names a node the map does not know: the map is not changed (the
// cluster asks for a new one), and never grows but by load().
TEST(SlotMap, MovedToAnUnknownNodeLeavesTheMap)
{
    Replies r;
    SlotMap map;

    EXPECT_FALSE(map.move(1, "10.0.0.9", 7000));
    EXPECT_EQ(map.node_of(1), SlotMap::kNoNode);
    ASSERT_TRUE(map.load(r.array({r.range(0, 16383, "10.0.0.1", 6379)})));

    int taken = 0;

    for (int port = 1; port <= 5000; port++) {
        taken += map.move(1, "10.0.0.1", port == 6379 ? 1 : port);
    }

    EXPECT_EQ(taken, 0);
    EXPECT_EQ(map.nodes().size(), 1u);
    EXPECT_EQ(map.nodes()[map.node_of(1)].port, 6379);
}

// 16384 ranges of one slot each, over 1000 masters (the bounds): taken,
// and every node found again by its address.
TEST(SlotMap, TakesAMapAtItsBounds)
{
    Replies r;
    std::vector<const Reply *> ranges;

    for (long long s = 0; s < kClusterSlots; s++) {
        std::size_t n = static_cast<std::size_t>(s) % SlotMap::kMaxNodes;
        // Same ports on other hosts, same hosts on other ports.
        ranges.push_back(r.range(s, s, r.host("10.0." + std::to_string(n % 7)
                                              + "." + std::to_string(n)),
                                 7000 + static_cast<long long>(n % 13)));
    }

    SlotMap map;
    ASSERT_TRUE(map.load(r.array_of(ranges)));
    ASSERT_EQ(map.nodes().size(), SlotMap::kMaxNodes);

    for (std::uint16_t s = 0; s < kClusterSlots; s++) {
        const SlotMap::Node &n = map.nodes()[map.node_of(s)];
        ASSERT_EQ(n.host, ranges[s]->element[2].element[0].text);
        ASSERT_EQ(map.find(n.host, n.port), map.node_of(s));
    }

    EXPECT_EQ(map.find("10.0.0.0", 7001), SlotMap::kNoNode);
    EXPECT_EQ(map.find("10.0.0.0", 7000), map.node_of(0));
}

// Past the bounds: rejected, the map as it was.
TEST(SlotMap, RejectsRepliesPastTheBounds)
{
    Replies r;
    SlotMap map;

    ASSERT_TRUE(map.load(r.array({r.range(0, 16383, "10.0.0.1", 6379)})));

    // More ranges than slots (the count is checked first).
    std::vector<const Reply *> many(kClusterSlots + 1, r.range(0, 0, "h", 1));
    EXPECT_FALSE(map.load(r.array_of(many)));

    // A slot in two ranges: 16384 ranges of all the slots would be a loop
    // of 2^28 steps; the second range ends it.
    std::vector<const Reply *> overlapping(kClusterSlots,
                                           r.range(0, 16383, "10.0.0.2", 1));
    EXPECT_FALSE(map.load(r.array_of(overlapping)));
    EXPECT_FALSE(map.load(r.array({r.range(0, 10, "10.0.0.2", 1),
                                   r.range(10, 20, "10.0.0.3", 1)})));

    // More masters than a cluster has nodes.
    std::vector<const Reply *> masters;
    for (long long n = 0; n <= static_cast<long long>(SlotMap::kMaxNodes);
         n++)
    {
        masters.push_back(r.range(n, n, "10.0.0.2", 1 + n));
    }
    EXPECT_FALSE(map.load(r.array_of(masters)));
    masters.pop_back();
    SlotMap most;
    EXPECT_TRUE(most.load(r.array_of(masters)));

    // A host longer than a DNS name.
    std::string longest(SlotMap::kMaxHostLength, 'h');
    EXPECT_FALSE(map.load(r.array({r.range(0, 1, r.host(longest + "h"), 1)})));
    EXPECT_TRUE(most.load(r.array({r.range(0, 1, r.host(longest), 1)})));

    // A range listing more nodes than a cluster has.
    std::vector<const Reply *> range = {r.integer(0), r.integer(1)};
    range.resize(2 + SlotMap::kMaxNodes + 1,
                 r.array({r.string("10.0.0.2"), r.integer(1)}));
    EXPECT_FALSE(map.load(r.array({r.array_of(range)})));
    range.pop_back();
    EXPECT_TRUE(most.load(r.array({r.array_of(range)})));

    ASSERT_EQ(map.nodes().size(), 1u);
    EXPECT_EQ(map.nodes()[map.node_of(77)].host, "10.0.0.1");
    EXPECT_EQ(map.node_of(16383), map.node_of(0));
}

TEST(SlotMap, SaysWhyAReplyIsRejected)
{
    Replies r;
    SlotMap map;
    std::string why;

    std::vector<const Reply *> many(100000, r.range(0, 0, "h", 1));
    EXPECT_FALSE(map.load(r.array_of(many), &why));
    EXPECT_EQ(why, "100000 ranges, more than 16384");

    EXPECT_FALSE(map.load(r.array({r.range(0, 10, "10.0.0.2", 1),
                                   r.range(5, 20, "10.0.0.3", 1)}),
                          &why));
    EXPECT_EQ(why, "slot 5 is in two ranges");

    std::string longest(SlotMap::kMaxHostLength + 1, 'h');
    EXPECT_FALSE(map.load(r.array({r.range(0, 1, r.host(longest), 1)}), &why));
    EXPECT_EQ(why, "a host of 256 bytes, more than 255");

    std::vector<const Reply *> masters;
    for (long long n = 0; n <= 1000; n++) {
        masters.push_back(r.range(n, n, "10.0.0.2", 1 + n));
    }
    EXPECT_FALSE(map.load(r.array_of(masters), &why));
    EXPECT_EQ(why, "more than 1000 masters");

    std::vector<const Reply *> range = {r.integer(0), r.integer(1)};
    range.resize(2 + 1001, r.array({r.string("10.0.0.2"), r.integer(1)}));
    EXPECT_FALSE(map.load(r.array({r.array_of(range)}), &why));
    EXPECT_EQ(why, "range 1 lists 1001 nodes, more than 1000");

    EXPECT_FALSE(map.load(r.array({r.range(0, 1, "h", 1),
                                   r.array({r.integer(0)})}),
                          &why));
    EXPECT_EQ(why, "range 2 is not [first, last, [host, port, ...], ...]");

    EXPECT_FALSE(map.load(r.error("ERR This instance has cluster support "
                                  "disabled"),
                          &why));
    EXPECT_EQ(why, "ERR This instance has cluster support disabled");

    EXPECT_FALSE(map.load(r.integer(1), &why));
    EXPECT_EQ(why, "not an array");
    EXPECT_TRUE(map.nodes().empty());
}

TEST(Redirect, MovedAndAsk)
{
    Redirect m = parse_redirect("MOVED 3999 127.0.0.1:6381");
    EXPECT_EQ(m.kind, Redirect::Kind::kMoved);
    EXPECT_EQ(m.slot, 3999);
    EXPECT_EQ(m.host, "127.0.0.1");
    EXPECT_EQ(m.port, 6381);

    Redirect a = parse_redirect("ASK 1 ::1:7000");
    EXPECT_EQ(a.kind, Redirect::Kind::kAsk);
    EXPECT_EQ(a.host, "::1");
    EXPECT_EQ(a.port, 7000);

    Redirect same_host = parse_redirect("MOVED 5 :7001");
    EXPECT_EQ(same_host.kind, Redirect::Kind::kMoved);
    EXPECT_EQ(same_host.host, "");
}

TEST(Redirect, OtherErrorsAreNone)
{
    for (const char *e : {"ERR x", "MOVED", "MOVED x 1.2.3.4:5",
                          "MOVED 16384 a:1", "ASK 1 a:0", "ASK 1 a:99999",
                          "MOVED 1 nocolon", "TRYAGAIN", "CLUSTERDOWN"})
    {
        EXPECT_EQ(parse_redirect(e).kind, Redirect::Kind::kNone) << e;
    }
}

}  // namespace
}  // namespace ratelimit
