// The command's arguments read into a call (command/batch_call.hpp): the
// number of zones with its layout letter, marked or not, a side zone's
// mode and base, and the keys the entries name, with the marker keys,
// against numkeys.  The arguments are std::strings handed over as Redis
// strings.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "command/batch_call.hpp"
#include "scripts/decide_command.hpp"

namespace ratelimit::test {

namespace {

using namespace std::literals;

const char *text_of(const redis::String *str, std::size_t *len)
{
    const auto *text = reinterpret_cast<const std::string *>(str);
    *len = text->size();
    return text->data();
}

const char kNumkeys[] = "ERR ratelimit: the entries name other than numkeys "
                        "keys";
const char kUnknown[] = "ERR ratelimit: unknown zone kind or mode";
const char kBadNumbers[] =
    "ERR ratelimit: a zone's limit, bucket and span must be whole numbers "
    "from 1, the limit at most 2^53, bucket * span at most "
    "604800000000000 ms";

class BatchCallTest : public ::testing::Test {
protected:
    void SetUp() override { redis::StringPtrLen = text_of; }

    // A call of `keys` keys, the number of zones `count`, zone 0 a sliding
    // window of limit `args_limit` and `mode`, zone 1 a GCRA zone of mode "3rl:g+" (a side zone),
    // and `entries`.
    const char *parse(int keys, const std::string &count, const char *mode,
                      const std::vector<std::string> &entries)
    {
        args = {"ratelimit.decide", std::to_string(keys)};

        for (int i = 0; i < keys; i++) {
            args.push_back("k" + std::to_string(i));
        }

        args.push_back(count);

        for (const char *arg : {args_limit, "1000", "10", "s", mode,
                                "5", "1000", "3", "g", "3rl:g+"})
        {
            args.push_back(arg);
        }

        args.insert(args.end(), entries.begin(), entries.end());
        argv.clear();

        for (std::string &arg : args) {
            argv.push_back(reinterpret_cast<redis::String *>(&arg));
        }

        return call.parse(argv.data(), static_cast<int>(argv.size()), 0, 0);
    }

    const char *args_limit = "5";
    std::vector<std::string> args;
    std::vector<redis::String *> argv;
    BatchCall call;
};

// Marker keys after the count keys, one a side zone: zone 1's; then zone
// 0's too, a dry run of side mode.
TEST_F(BatchCallTest, MarkerKeysBeforeTheLetter)
{
    ASSERT_EQ(parse(2, "2P", "1", {"c\1"}), nullptr);
    EXPECT_TRUE(call.marked);
    EXPECT_TRUE(call.zones[0].packed);
    EXPECT_EQ(call.count_keys, 1u);
    EXPECT_EQ(call.reply_size, 1u + 4);
    EXPECT_EQ(call.zones[0].side_base, "");
    EXPECT_EQ(call.zones[1].side_base, "rl:g+");
    EXPECT_TRUE(call.zones[1].enforce);

    ASSERT_EQ(parse(5, "2H", "2rl:s+", {"p\0\1"s, "c\1"}), nullptr);
    EXPECT_TRUE(call.marked);
    EXPECT_FALSE(call.zones[0].packed);
    EXPECT_FALSE(call.zones[0].enforce);
    EXPECT_EQ(call.zones[0].side_base, "rl:s+");
    EXPECT_EQ(call.count_keys, 3u);
    EXPECT_EQ(call.reply_size, 1u + (1 + 3 * 2) + (1 + 3));
}

// Without the marked letter there are none: every side zone reads.
TEST_F(BatchCallTest, NoMarkerKeys)
{
    for (const char *count : {"2", "2p", "2h", " 2 p", "0x2h"}) {
        ASSERT_EQ(parse(1, count, "1", {"c\1"}), nullptr) << count;
        EXPECT_FALSE(call.marked) << count;
        EXPECT_EQ(call.count_keys, 1u);
        EXPECT_EQ(call.reply_size, 1u + 4);
    }
}

// Version 1's side key count among them.
TEST_F(BatchCallTest, MalformedCountsAreRefused)
{
    for (const char *count :
         {"2x", "2p1", "2p0", "2m", "2pm", "2mp", "2PP", "P2", "P", "p",
          "", "2P ", "2Px", "-2p", "-2P", "2.5H", "1000000000P"})
    {
        EXPECT_STREQ(parse(2, count, "1", {"c\1"}), kZoneCountRefused)
            << count;
    }
}

TEST_F(BatchCallTest, KeysNamedAgainstNumkeys)
{
    EXPECT_STREQ(parse(1, "2P", "1", {"c\1"}), kNumkeys);
    EXPECT_STREQ(parse(3, "2P", "1", {"c\1"}), kNumkeys);
    EXPECT_STREQ(parse(2, "2p", "1", {"c\1"}), kNumkeys);

    // A side zone no entry names still has its marker.
    EXPECT_EQ(parse(2, "2P", "1", {"c\0"s}), nullptr);
    EXPECT_EQ(parse(3, "2P", "3rl:s+", {"c\0"s}), nullptr);
    EXPECT_EQ(parse(1, "2p", "3rl:s+", {"c\0"s}), nullptr);
}

// A side mode takes its base right after its letter; a mode of one byte
// is 0 or 1.
TEST_F(BatchCallTest, SideModes)
{
    ASSERT_EQ(parse(1, "2p", "3{rl}:s+", {"c\0"s}), nullptr);
    EXPECT_TRUE(call.zones[0].enforce);
    EXPECT_EQ(call.zones[0].side_base, "{rl}:s+");

    for (const char *mode : {"3", "2", "1rl:s+", "0rl:s+", "4rl:s+", ""}) {
        EXPECT_STREQ(parse(1, "2p", mode, {"c\0"s}), kUnknown) << mode;
    }
}

// The script's fast path takes a counted request of one zone, but not a
// side zone's of limit 0 (the careful path applies its override or
// rejects); a zone of limit 0 but in side mode refuses the call.
TEST_F(BatchCallTest, NoFastPathUnderLimitZero)
{
    ASSERT_EQ(parse(2, "2p", "3rl:s+", {"c\0"s, "c\1"}), nullptr);
    EXPECT_TRUE(call.entries[0].solo);
    EXPECT_TRUE(call.entries[1].solo);
    ASSERT_EQ(parse(1, "2p", "3rl:s+", {"p\0"s}), nullptr);
    EXPECT_FALSE(call.entries[0].solo);

    args_limit = "0";
    ASSERT_EQ(parse(4, "2p", "3rl:s+", {"c\0"s, "c\1", "c\0\1"s}),
              nullptr);
    EXPECT_EQ(call.zones[0].limit, 0);
    EXPECT_FALSE(call.entries[0].solo);
    EXPECT_TRUE(call.entries[1].solo);
    EXPECT_FALSE(call.entries[2].solo);
    ASSERT_EQ(parse(1, "2p", "2rl:s+", {"c\0"s}), nullptr);
    EXPECT_FALSE(call.entries[0].solo);

    for (const char *mode : {"1", "0", "3", "4rl:s+"}) {
        EXPECT_STREQ(parse(1, "2p", mode, {"c\0"s}), kBadNumbers) << mode;
    }
}

// A settle's zone is its last byte, even where its numbers or form fail
// it (it tells that zone's override); a lease's, each byte after its ':'.
TEST_F(BatchCallTest, FailedSettlesAndLeasesNameTheirZones)
{
    ASSERT_EQ(parse(1, "2p", "1", {"s99999999999999999999,1:\1"}),
              nullptr);
    EXPECT_STREQ(call.entries[0].error, "ERR ratelimit: malformed settle");
    EXPECT_EQ(call.entries[0].zones, "\1");

    ASSERT_EQ(parse(1, "2p", "1", {"s1,x:\1"}), nullptr);
    EXPECT_EQ(call.entries[0].zones, "\1");
    ASSERT_EQ(parse(1, "2p", "1", {"s\1"}), nullptr);
    EXPECT_EQ(call.entries[0].zones, "\1");

    ASSERT_EQ(parse(4, "2p", "3rl:s+", {"l5:\1\0\1\7"s}), nullptr);
    EXPECT_STREQ(call.entries[0].error,
                 "ERR ratelimit: a lease is of one zone");
    EXPECT_EQ(call.count_keys, 4u);
    EXPECT_EQ(call.reply_size, 1u + 1 + 3 * 4 + 1);
}

}  // namespace

}  // namespace ratelimit::test
