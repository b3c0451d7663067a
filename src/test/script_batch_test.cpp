#include "script_batch.hpp"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include "window_script.hpp"

namespace ratelimit {
namespace {

// A command is a RESP array of bulk strings, which hiredis's reply reader
// reads like any reply: the arguments as Redis will see them.
std::vector<std::string> arguments(const ScriptBatch &batch, bool eval)
{
    std::string command;
    EXPECT_TRUE(batch.write_command(eval, &command));

    redisReader *rd = redisReaderCreate();
    void *reply = nullptr;
    std::vector<std::string> out;

    EXPECT_EQ(redisReaderFeed(rd, command.data(), command.size()), REDIS_OK);
    EXPECT_EQ(redisReaderGetReply(rd, &reply), REDIS_OK);

    auto *r = static_cast<redisReply *>(reply);
    EXPECT_NE(r, nullptr);
    if (r != nullptr) {
        EXPECT_EQ(r->type, REDIS_REPLY_ARRAY);
        for (std::size_t i = 0; i < r->elements; i++) {
            EXPECT_EQ(r->element[i]->type, REDIS_REPLY_STRING);
            out.emplace_back(r->element[i]->str, r->element[i]->len);
        }
        freeReplyObject(r);
    }

    void *rest = nullptr;
    EXPECT_EQ(redisReaderGetReply(rd, &rest), REDIS_OK);
    EXPECT_EQ(rest, nullptr) << "bytes after the command";
    redisReaderFree(rd);
    return out;
}

std::string zone_args(const Policy &p, bool fixed)
{
    char out[kZoneArgsMaxSize];
    return std::string(out, write_zone_args(p, fixed, out));
}

TEST(ScriptBatch, RequestsInOrderKeysFirst)
{
    std::string minute = zone_args({100, 60000, 1000}, false);
    std::string day = zone_args({5000, 86400000, 86400000}, true);
    std::string binary("k\0\r\n$3\r\n", 9);

    ScriptBatch batch;
    std::string_view keys1[] = {"rl:a:1", binary};
    std::string_view args1[] = {minute, day};
    bool enforce1[] = {true, false};
    std::string_view keys2[] = {""};
    std::string_view args2[] = {day};
    bool enforce2[] = {true};

    ASSERT_TRUE(batch.add(false, 2, keys1, args1, enforce1));
    ASSERT_TRUE(batch.add(true, 1, keys2, args2, enforce2));
    EXPECT_EQ(batch.entries(), 2u);

    std::vector<std::string> want = {
        "EVALSHA", std::string(window_script_sha1()), "3",
        "rl:a:1", binary, "",
        "c", "2", "100", "1000", "60", "s", "1",
        "5000", "86400000", "1", "f", "0",
        "p", "1", "5000", "86400000", "1", "f", "1",
    };
    EXPECT_EQ(arguments(batch, false), want);

    want[0] = "EVAL";
    want[1] = std::string(window_script());
    EXPECT_EQ(arguments(batch, true), want);
}

TEST(ScriptBatch, ClearStartsAfresh)
{
    std::string args = zone_args({1, 1000, 1000}, true);
    std::string_view key[] = {"x"};
    std::string_view zone[] = {args};
    bool enforce[] = {true};

    ScriptBatch batch;
    ASSERT_TRUE(batch.add(false, 1, key, zone, enforce));
    batch.clear();
    EXPECT_EQ(batch.entries(), 0u);
    ASSERT_TRUE(batch.add(false, 1, key, zone, enforce));

    std::vector<std::string> want = {
        "EVALSHA", std::string(window_script_sha1()), "1", "x",
        "c", "1", "1", "1000", "1", "f", "1",
    };
    EXPECT_EQ(arguments(batch, false), want);
}

TEST(ScriptBatch, LargestNumbersFit)
{
    const std::uint64_t big = UINT64_MAX;
    std::string args = zone_args({big, big, 1}, false);
    EXPECT_LE(args.size(), kZoneArgsMaxSize);

    std::string_view key[] = {"k"};
    std::string_view zone[] = {args};
    bool enforce[] = {true};
    ScriptBatch batch;
    ASSERT_TRUE(batch.add(false, 1, key, zone, enforce));

    std::vector<std::string> got = arguments(batch, false);
    ASSERT_EQ(got.size(), 11u);
    EXPECT_EQ(got[6], "18446744073709551615");
    EXPECT_EQ(got[7], "1");
    EXPECT_EQ(got[8], "18446744073709551615");
}

TEST(ScriptBatch, ManyRequests)
{
    std::string args = zone_args({10, 1000, 1000}, false);
    ScriptBatch batch;
    std::vector<std::string> keys;

    for (int i = 0; i < 500; i++) {
        keys.push_back(std::string(300, static_cast<char>('a' + i % 26))
                       + std::to_string(i));
    }
    for (const std::string &k : keys) {
        std::string_view key[] = {k};
        std::string_view zone[] = {args};
        bool enforce[] = {true};
        ASSERT_TRUE(batch.add(false, 1, key, zone, enforce));
    }

    std::vector<std::string> got = arguments(batch, false);
    ASSERT_EQ(got.size(), 3 + 500 + 500 * 7u);
    EXPECT_EQ(got[2], "500");
    for (std::size_t i = 0; i < keys.size(); i++) {
        EXPECT_EQ(got[3 + i], keys[i]);
        EXPECT_EQ(got[3 + 500 + i * 7], "c");
    }
}

}  // namespace
}  // namespace ratelimit
