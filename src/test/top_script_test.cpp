#include "top/top_script.hpp"

#include <string>

#include <gtest/gtest.h>

#include "report/top_json.hpp"
#include "resp_parse.hpp"

namespace ratelimit {
namespace {

ReplyPtr parse(std::string_view bytes)
{
    std::size_t used = 0;
    ReplyPtr reply = RespReader(bytes).read(&used);
    EXPECT_NE(reply, nullptr);
    EXPECT_EQ(used, bytes.size());
    return reply;
}

std::string word(const Reply &command, std::size_t i)
{
    return std::string(command.element[i].text);
}

TEST(TopScript, BaseTaggedInACluster)
{
    EXPECT_EQ(top_base("rl", "api", false), "rl:api!top");
    EXPECT_EQ(top_base("rl", "api", true), "{rl:api!top}");
}

// The flush's keys, numbers and pairs, requests' first.
TEST(TopScript, FlushCall)
{
    TopFlush flush{"rl:api!top", 1700000005, 7, 2, 1, 0,
                   {"a", "b", "a"}, {5, 2, 2}, 2};
    ReplyPtr command = parse(top_flush_call(flush, false));

    ASSERT_EQ(command->elements, 6u + 6 + 6);
    EXPECT_EQ(word(*command, 0), "EVALSHA");
    EXPECT_EQ(word(*command, 1).size(), 40u);
    EXPECT_EQ(word(*command, 2), "3");
    EXPECT_EQ(word(*command, 3), "rl:api!top:1700000005:q");
    EXPECT_EQ(word(*command, 4), "rl:api!top:1700000005:j");
    EXPECT_EQ(word(*command, 5), "rl:api!top:1700000005:t");
    EXPECT_EQ(word(*command, 6), std::to_string(kTopKeepMs));
    EXPECT_EQ(word(*command, 7), "7");
    EXPECT_EQ(word(*command, 8), "2");
    EXPECT_EQ(word(*command, 9), "1");
    EXPECT_EQ(word(*command, 10), "0");
    EXPECT_EQ(word(*command, 11), "2");
    EXPECT_EQ(word(*command, 12) + word(*command, 13), "a5");
    EXPECT_EQ(word(*command, 16) + word(*command, 17), "a2");

    ReplyPtr eval = parse(top_flush_call(flush, true));
    EXPECT_EQ(word(*eval, 0), "EVAL");
    EXPECT_NE(word(*eval, 1).find("ZINCRBY"), std::string::npos);
}

// The 12 slices before `end`, newest first.
TEST(TopScript, ReadCall)
{
    ReplyPtr command = parse(top_read_call("rl:api!top", 1700000060, 5,
                                           false));

    // 3 keys a slice, the newest first: 30 slices of 2 s before the end.
    ASSERT_EQ(command->elements, 3u + 90 + 1);
    EXPECT_EQ(word(*command, 2), "90");
    EXPECT_EQ(word(*command, 3), "rl:api!top:1700000058:q");
    EXPECT_EQ(word(*command, 92), "rl:api!top:1700000000:t");
    EXPECT_EQ(word(*command, 93), "5");
}

TEST(TopScript, DecodeAndJson)
{
    ReplyPtr reply = parse(
        "*6\r\n:10\r\n:4\r\n:2\r\n:1\r\n"
        "*3\r\n$2\r\nk1\r\n:6\r\n:3\r\n"
        "*6\r\n$2\r\nk1\r\n:6\r\n:3\r\n$3\r\na\"\x01\r\n:4\r\n:0\r\n");
    TopAnswer answer;

    ASSERT_EQ(decode_top_read(*reply, &answer), TopReplyKind::kAnswer);
    ASSERT_EQ(answer.by_rejected.size(), 1u);
    ASSERT_EQ(answer.by_requests.size(), 2u);

    TopReport report{"api", 1700000000, 1700000060, &answer};
    std::string out(top_json_max_size(report), '\0');
    out.resize(write_top_json(report, out.data()));

    EXPECT_EQ(out,
              "{\"zone\":\"api\",\"window\":60,\"from\":1700000000,"
              "\"to\":1700000060,\"requests\":10,\"rejected\":4,"
              "\"error_bound\":2,"
              "\"top_rejected\":[{\"key\":\"k1\",\"key_hex\":\"6b31\","
              "\"requests\":6,\"rejected\":3,\"share\":0.750}],"
              "\"top_requests\":[{\"key\":\"k1\",\"key_hex\":\"6b31\","
              "\"requests\":6,\"rejected\":3,\"share\":0.750},"
              "{\"key\":\"a\\\"\\u0001\",\"key_hex\":\"612201\","
              "\"requests\":4,\"rejected\":0,\"share\":0.000}]}");
}

TEST(TopScript, DecodeRefusesOtherReplies)
{
    TopAnswer answer;

    EXPECT_EQ(decode_top_read(*parse("-NOSCRIPT No matching script\r\n"),
                              &answer),
              TopReplyKind::kNoScript);
    EXPECT_EQ(decode_top_read(*parse("-ERR x\r\n"), &answer),
              TopReplyKind::kError);
    EXPECT_EQ(decode_top_read(*parse("*2\r\n:1\r\n:2\r\n"), &answer),
              TopReplyKind::kError);
}

}  // namespace
}  // namespace ratelimit
