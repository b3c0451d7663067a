#include "cluster/cluster_slot.hpp"

#include <cstring>
#include <deque>
#include <initializer_list>

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

// redisReply trees for CLUSTER SLOTS, owned by the fixture.
class Replies {
public:
    redisReply *integer(long long v)
    {
        redisReply *r = make(REDIS_REPLY_INTEGER);
        r->integer = v;
        return r;
    }

    redisReply *string(const char *s)
    {
        redisReply *r = make(REDIS_REPLY_STRING);
        r->str = const_cast<char *>(s);
        r->len = std::strlen(s);
        return r;
    }

    redisReply *array(std::initializer_list<redisReply *> items)
    {
        redisReply *r = make(REDIS_REPLY_ARRAY);
        arrays_.emplace_back(items);
        r->element = arrays_.back().data();
        r->elements = items.size();
        return r;
    }

    redisReply *range(long long first, long long last, const char *host,
                      long long port)
    {
        return array({integer(first), integer(last),
                      array({string(host), integer(port), string("id")})});
    }

private:
    redisReply *make(int type)
    {
        replies_.emplace_back();
        redisReply *r = &replies_.back();
        std::memset(r, 0, sizeof(redisReply));
        r->type = type;
        return r;
    }

    std::deque<redisReply> replies_;
    std::deque<std::vector<redisReply *>> arrays_;
};

TEST(SlotMap, LoadsMastersOfEachRange)
{
    Replies r;
    SlotMap map;

    ASSERT_TRUE(map.load(r.array({r.range(0, 5460, "127.0.0.1", 7000),
                                  r.range(5461, 10922, "127.0.0.1", 7001),
                                  r.range(10923, 16383, "127.0.0.1", 7002),
                                  r.range(100, 100, "127.0.0.1", 7000)})));
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

    ASSERT_TRUE(map.load(r.array({r.range(0, 16383, "10.0.0.1", 6379)})));
    ASSERT_TRUE(map.move(3999, "10.0.0.2", 6380));
    EXPECT_EQ(map.nodes()[map.node_of(3999)].host, "10.0.0.2");
    EXPECT_EQ(map.nodes()[map.node_of(4000)].host, "10.0.0.1");
    ASSERT_TRUE(map.move(4000, "10.0.0.2", 6380));
    EXPECT_EQ(map.nodes().size(), 2u);
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
