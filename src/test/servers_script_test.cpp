#include "scripts/servers_script.hpp"

#include <gtest/gtest.h>

#include "resp_parse.hpp"

namespace ratelimit {
namespace {

TEST(ServersScript, KeyCarriesTheFleetTagInACluster)
{
    EXPECT_EQ(servers_key("rl", false), "rl:servers");
    EXPECT_EQ(servers_key("rl", true), "{rl}:servers");
}

// A command is a RESP array of bulks: read back as a reply, it is one.
TEST(ServersScript, CallAnnouncesOrCounts)
{
    std::string call = servers_call("rl:servers", "host:42");
    ReplyPtr argv = parse(call);

    ASSERT_TRUE(argv);
    ASSERT_EQ(argv->type, REDIS_REPLY_ARRAY);
    ASSERT_EQ(argv->elements, 6u);
    EXPECT_EQ(std::string_view(argv->element[0]->str), "EVAL");
    EXPECT_EQ(std::string_view(argv->element[1]->str), servers_script());
    EXPECT_EQ(std::string_view(argv->element[2]->str), "1");
    EXPECT_EQ(std::string_view(argv->element[3]->str), "rl:servers");
    EXPECT_EQ(std::string_view(argv->element[4]->str), "host:42");
    EXPECT_EQ(std::string_view(argv->element[5]->str), "3000");

    ReplyPtr count = parse(servers_call("rl:servers", ""));
    ASSERT_TRUE(count);
    EXPECT_EQ(count->element[4]->len, 0u);
}

}  // namespace
}  // namespace ratelimit
