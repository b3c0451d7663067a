// The command's arguments read into a call (command/batch_call.hpp): the
// number of zones with its layout letter and number of side keys, and the
// keys the entries name, count keys and side keys, against numkeys.  The
// arguments are std::strings handed over as Redis strings.
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
const char kSides[] = "ERR ratelimit: the entries name other than the side "
                      "keys given";

class BatchCallTest : public ::testing::Test {
protected:
    void SetUp() override { redis::StringPtrLen = text_of; }

    // A call of `keys` keys, the number of zones `count`, zone 0 a sliding
    // window of `mode`, zone 1 a GCRA zone of mode "3", and `entries`.
    const char *parse(int keys, const std::string &count, const char *mode,
                      const std::vector<std::string> &entries)
    {
        args = {"ratelimit.decide", std::to_string(keys)};

        for (int i = 0; i < keys; i++) {
            args.push_back("k" + std::to_string(i));
        }

        args.push_back(count);

        for (const char *arg : {"5", "1000", "10", "s", mode,
                                "5", "1000", "3", "g", "3"})
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

    std::vector<std::string> args;
    std::vector<redis::String *> argv;
    BatchCall call;
};

// A count key and a side key (zone 1's); then a request of zone 0 alone.
TEST_F(BatchCallTest, SideKeysAfterTheLetter)
{
    ASSERT_EQ(parse(2, "2p1", "1", {"c\1"}), nullptr);
    EXPECT_EQ(call.count_keys, 1u);
    EXPECT_EQ(call.side_keys, 1u);
    EXPECT_EQ(call.reply_size, 1u + 4 + 3);
    EXPECT_TRUE(call.zones[1].side);
    EXPECT_TRUE(call.zones[1].enforce);

    // Zone 0 of mode 2, a dry run with side keys: 2 + 1 side keys.
    ASSERT_EQ(parse(6, "2h003", "2", {"p\0\1"s, "c\1"}), nullptr);
    EXPECT_FALSE(call.zones[0].packed);
    EXPECT_FALSE(call.zones[0].enforce);
    EXPECT_TRUE(call.zones[0].side);
    EXPECT_EQ(call.count_keys, 3u);
    EXPECT_EQ(call.side_keys, 3u);
    EXPECT_EQ(call.entries[0].sides, 2u);
    EXPECT_EQ(call.reply_size, 1u + (1 + 3 * 2 + 3 * 2) + (1 + 3 + 3));
}

TEST_F(BatchCallTest, NoSideKeys)
{
    for (const char *count : {"2", "2p", "2h", "2p0"}) {
        ASSERT_EQ(parse(1, count, "1", {"c\0"s}), nullptr) << count;
        EXPECT_EQ(call.side_keys, 0u);
        EXPECT_EQ(call.reply_size, 1u + 4);
    }
}

TEST_F(BatchCallTest, MalformedCountsAreRefused)
{
    for (const char *count :
         {"2x1", "2p-1", "2p1.5", "2p 1", "p1", "2p1p", "2ph", "", "2pp1",
          "2p1000000000", "-2p"})
    {
        EXPECT_STREQ(parse(2, count, "1", {"c\1"}), kZoneCountRefused)
            << count;
    }
}

TEST_F(BatchCallTest, KeysNamedAgainstNumkeys)
{
    EXPECT_STREQ(parse(1, "2p1", "1", {"c\1"}), kNumkeys);
    EXPECT_STREQ(parse(3, "2p1", "1", {"c\1"}), kNumkeys);
    EXPECT_STREQ(parse(2, "2p", "1", {"c\1"}), kSides);
    EXPECT_STREQ(parse(2, "2p2", "1", {"c\0"s}), kNumkeys);
    EXPECT_STREQ(parse(1, "2p1", "1", {"c\0"s}), kSides);
}

// A settle names its zone's side key even where its numbers fail it; a
// lease, each byte after its ':' that names a side zone.
TEST_F(BatchCallTest, FailedSettlesAndLeasesNameTheirSideKeys)
{
    ASSERT_EQ(parse(2, "2p1", "1", {"s99999999999999999999,1:\1"}),
              nullptr);
    EXPECT_STREQ(call.entries[0].error, "ERR ratelimit: malformed settle");
    EXPECT_EQ(call.side_keys, 1u);

    ASSERT_EQ(parse(1, "2p", "1", {"s1,x:\1"}), nullptr);
    EXPECT_EQ(call.side_keys, 0u);

    ASSERT_EQ(parse(7, "2p3", "3", {"l5:\1\0\1\7"s}), nullptr);
    EXPECT_STREQ(call.entries[0].error,
                 "ERR ratelimit: a lease is of one zone");
    EXPECT_EQ(call.count_keys, 4u);
    EXPECT_EQ(call.side_keys, 3u);
    EXPECT_EQ(call.reply_size, 1u + 1 + 3 * 4 + 1 + 3 * 3);
}

}  // namespace

}  // namespace ratelimit::test
