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
    ASSERT_EQ(argv->type, Reply::Type::kArray);
    ASSERT_EQ(argv->elements, 6u);
    EXPECT_EQ(argv->element[0].text, "EVAL");
    EXPECT_EQ(argv->element[1].text, servers_script());
    EXPECT_EQ(argv->element[2].text, "1");
    EXPECT_EQ(argv->element[3].text, "rl:servers");
    EXPECT_EQ(argv->element[4].text, "host:42");
    EXPECT_EQ(argv->element[5].text, "3000");

    ReplyPtr count = parse(servers_call("rl:servers", ""));
    ASSERT_TRUE(count);
    EXPECT_EQ(count->element[4].type, Reply::Type::kString);
    EXPECT_EQ(count->element[4].text.size(), 0u);
}

}  // namespace
}  // namespace ratelimit
