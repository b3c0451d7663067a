#include "scripts/concurrency_script.hpp"

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "resp_parse.hpp"

#include "scripts/window_script.hpp"

namespace ratelimit {
namespace {

std::string element(const Reply *r, size_t i)
{
    return std::string(r->element[i].text);
}

const ConcurrencyPolicy kPolicy{4, 200, 30000, 10000};

TEST(ConcurrencyScript, FitsBeforeAuth)
{
    EXPECT_LT(concurrency_script().size(), kMaxScriptSize);
    EXPECT_EQ(concurrency_script_sha1().size(), kSha1HexLength);
}

TEST(ConcurrencyScript, KeysShareTheSubjectsHashTag)
{
    EXPECT_EQ(held_key("rl:up:k}1"), "{rl:up:k}1}:held");

    PermitCall call{PermitOp::kAcquire, "rl:up:k1", "00ff.7", &kPolicy,
                  "rl:wake:", false, 0, ""};
    ReplyPtr argv = parse(format_permit_call(call, false));

    ASSERT_TRUE(argv);
    ASSERT_EQ(argv->elements, 15u);
    EXPECT_EQ(element(argv.get(), 0), "EVALSHA");
    EXPECT_EQ(element(argv.get(), 1), concurrency_script_sha1());
    EXPECT_EQ(element(argv.get(), 2), "2");
    EXPECT_EQ(element(argv.get(), 3), "{rl:up:k1}:held");
    EXPECT_EQ(element(argv.get(), 4), "{rl:up:k1}:queue");
    EXPECT_EQ(element(argv.get(), 5), "a");
    EXPECT_EQ(element(argv.get(), 6), "00ff.7");
    EXPECT_EQ(element(argv.get(), 7), "4");
    EXPECT_EQ(element(argv.get(), 8), "200");
    EXPECT_EQ(element(argv.get(), 9), "10000");
    EXPECT_EQ(element(argv.get(), 10), "30000");
    EXPECT_EQ(element(argv.get(), 11), "rl:wake:");
    EXPECT_EQ(element(argv.get(), 12), "0");
    EXPECT_EQ(element(argv.get(), 13), "0");
    EXPECT_EQ(element(argv.get(), 14), "");

    call.dry_run = true;
    argv = parse(format_permit_call(call, true));
    ASSERT_TRUE(argv);
    EXPECT_EQ(element(argv.get(), 0), "EVAL");
    EXPECT_EQ(element(argv.get(), 1), concurrency_script());
    EXPECT_EQ(element(argv.get(), 12), "1");

    call = {PermitOp::kRelease, "rl:up:k1", "00ff.7", &kPolicy, "rl:wake:",
            false, 1795000000123456, "0123456789abcdef0123456789abcdef01234567"};
    argv = parse(format_permit_call(call, false));
    ASSERT_TRUE(argv);
    EXPECT_EQ(element(argv.get(), 5), "r");
    EXPECT_EQ(element(argv.get(), 13), "1795000000123456");
    EXPECT_EQ(element(argv.get(), 14),
              "0123456789abcdef0123456789abcdef01234567");
}

TEST(ConcurrencyScript, DecodesReplies)
{
    ReplyPtr r = parse("*2\r\n:0\r\n:3\r\n");
    PermitReply d = decode_permit_reply(r.get());
    EXPECT_EQ(d.kind, PermitReply::Kind::kAnswer);
    EXPECT_EQ(d.code, PermitCode::kQueued);
    EXPECT_EQ(d.number, 3u);

    r = parse("*3\r\n:1\r\n:2\r\n:5\r\n");
    d = decode_permit_reply(r.get());
    EXPECT_EQ(d.kind, PermitReply::Kind::kAnswer);
    EXPECT_EQ(d.number, 2u);
    EXPECT_EQ(d.queued, 5u);

    r = parse("-NOSCRIPT No matching script\r\n");
    EXPECT_EQ(decode_permit_reply(r.get()).kind, PermitReply::Kind::kNoScript);
    r = parse("-WRONGTYPE x\r\n");
    d = decode_permit_reply(r.get());
    EXPECT_EQ(d.kind, PermitReply::Kind::kError);
    EXPECT_EQ(d.error, "WRONGTYPE x");

    for (const char *bad : {"*2\r\n:3\r\n:0\r\n", "*2\r\n:1\r\n:-1\r\n",
                            "*1\r\n:1\r\n", "*2\r\n$1\r\n1\r\n:0\r\n",
                            ":1\r\n"})
    {
        r = parse(bad);
        EXPECT_EQ(decode_permit_reply(r.get()).kind,
                  PermitReply::Kind::kMalformed) << bad;
    }

    EXPECT_EQ(decode_permit_reply(nullptr).kind, PermitReply::Kind::kMalformed);
}

}  // namespace
}  // namespace ratelimit
