#include "scripts/script_batch.hpp"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "resp_parse.hpp"
#include "scripts/decide_command.hpp"
#include "scripts/window_script.hpp"

namespace ratelimit {
namespace {

// A command is a RESP array of bulk strings, which reads like any reply:
// the arguments as Redis will see them.
std::vector<std::string> parse_command(const std::string &command)
{
    std::size_t used = 0;
    ReplyPtr r = parse(command, &used);
    std::vector<std::string> out;

    EXPECT_NE(r, nullptr);
    if (r != nullptr) {
        EXPECT_EQ(r->type, Reply::Type::kArray);
        for (std::size_t i = 0; i < r->elements; i++) {
            EXPECT_EQ(r->element[i].type, Reply::Type::kString);
            out.emplace_back(r->element[i].text);
        }
        EXPECT_EQ(used, command.size()) << "bytes after the command";
    }
    return out;
}

// New keys packed strings unless `packed` is false.
std::vector<std::string> arguments(
    const ScriptBatch &batch,
    ScriptBatch::Form form = ScriptBatch::Form::kEvalSha,
    bool cross_slot = false, bool packed = true)
{
    std::string command;
    EXPECT_TRUE(batch.write_command(form, &command, cross_slot, packed));
    return parse_command(command);
}

std::string zone_args(Policy p, bool fixed)
{
    p.algorithm = fixed ? Algorithm::kFixed : Algorithm::kSliding;
    char out[kZoneArgsMaxSize];
    return std::string(out, write_zone_args(p, out));
}

// The arrays add() reads for a request in as many zones as one may have:
// every key "k", every zone enforced, its arguments `zone_args` until a
// test sets them.
struct LargestRequest {
    std::string_view keys[kMaxZonesPerRequest];
    std::string_view args[kMaxZonesPerRequest];
    bool enforce[kMaxZonesPerRequest];

    explicit LargestRequest(std::string_view zone_args = {})
    {
        for (std::size_t i = 0; i < kMaxZonesPerRequest; i++) {
            keys[i] = "k";
            args[i] = zone_args;
            enforce[i] = true;
        }
    }

    bool add_to(ScriptBatch &batch, bool peek, std::size_t zones) const
    {
        return batch.add(peek, zones, keys, args, enforce);
    }
};

TEST(ScriptBatch, KeysThenZonesOnceThenEntries)
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
    std::string_view keys3[] = {"rl:a:2", "rl:b:2"};
    bool enforce3[] = {true, false};

    ASSERT_TRUE(batch.add(false, 2, keys1, args1, enforce1));
    ASSERT_TRUE(batch.add(true, 1, keys2, args2, enforce2));
    ASSERT_TRUE(batch.add(false, 2, keys3, args1, enforce3));
    EXPECT_EQ(batch.entries(), 3u);

    // The day zone enforced in request 2 is not the day zone dry-run in
    // request 1: three zones.
    std::vector<std::string> want = {
        "EVALSHA", std::string(window_script_sha1()), "5",
        "rl:a:1", binary, "", "rl:a:2", "rl:b:2",
        "3p",
        "100", "1000", "60", "s", "1",
        "5000", "86400000", "1", "f", "0",
        "5000", "86400000", "1", "f", "1",
        std::string("c\0\1", 3), std::string("p\2", 2),
        std::string("c\0\1", 3),
    };
    EXPECT_EQ(arguments(batch), want);

    want[0] = "EVAL";
    want[1] = std::string(window_script());
    EXPECT_EQ(arguments(batch, ScriptBatch::Form::kEval), want);

    // The Redis module's command takes what follows the script.
    std::vector<std::string> command = want;
    command.erase(command.begin());
    command[0] = kDecideCommand;
    EXPECT_EQ(arguments(batch, ScriptBatch::Form::kDecideCommand), command);

    // Cross-slot: no declared key, the key count first in ARGV.
    want[1] = std::string(cross_slot_script());
    want.insert(want.begin() + 2, "0");
    EXPECT_EQ(arguments(batch, ScriptBatch::Form::kEval, true), want);
    want[0] = "EVALSHA";
    want[1] = std::string(cross_slot_script_sha1());
    EXPECT_EQ(arguments(batch, ScriptBatch::Form::kEvalSha, true), want);
}

// Costs other than 1 make a "w" entry, every zone's cost in it; costs of 1
// keep the "c" the script takes fastest.  A settle is an "s" entry of one
// zone, sharing the zones of the batch's requests.
TEST(ScriptBatch, CostsAndSettles)
{
    std::string minute = zone_args({100, 60000, 1000}, false);
    std::string hour = zone_args({5000, 3600000, 3600000}, true);
    std::string_view keys[] = {"rl:a:1", "rl:b:1"};
    std::string_view args[] = {minute, hour};
    bool enforce[] = {true, true};
    std::uint64_t ones[] = {1, 1};
    std::uint64_t costs[] = {7, 0};
    std::uint64_t largest[] = {ScriptBatch::kMaxCost, 1};

    ScriptBatch batch;
    ASSERT_TRUE(batch.add(false, 2, keys, args, enforce, nullptr, ones));
    ASSERT_TRUE(batch.add(false, 2, keys, args, enforce, nullptr, costs));
    ASSERT_TRUE(batch.add(false, 2, keys, args, enforce, nullptr, largest));
    ASSERT_TRUE(batch.add_settle("rl:b:1", hour, -12, 480000));
    ASSERT_TRUE(batch.add_settle("rl:a:1", minute, 40, 28333333));
    EXPECT_EQ(batch.entries(), 5u);
    EXPECT_EQ(batch.reply_elements(), 1u + 3 * 7 + 2 * 4);
    EXPECT_EQ(batch.reply_offset(3), 1u + 3 * 7);

    std::vector<std::string> want = {
        "EVALSHA", std::string(window_script_sha1()), "8",
        "rl:a:1", "rl:b:1", "rl:a:1", "rl:b:1", "rl:a:1", "rl:b:1",
        "rl:b:1", "rl:a:1",
        "2p",
        "100", "1000", "60", "s", "1",
        "5000", "3600000", "1", "f", "1",
        std::string("c\0\1", 3), std::string("w7,0:\0\1", 7),
        std::string("w9007199254740992,1:\0\1", 22),
        std::string("s-12,480000:\1", 13),
        std::string("s40,28333333:\0", 14),
    };
    EXPECT_EQ(arguments(batch), want);

    // A cost past what a Lua number holds exactly, or a settle of as many
    // units, adds nothing.
    std::uint64_t too_large[] = {ScriptBatch::kMaxCost + 1, 1};
    EXPECT_FALSE(batch.add(false, 2, keys, args, enforce, nullptr,
                           too_large));
    EXPECT_FALSE(batch.add_settle("rl:a:1", minute,
                                  -static_cast<std::int64_t>(
                                      ScriptBatch::kMaxCost) - 1, 1));
    EXPECT_EQ(arguments(batch), want);
}

// A lease is an "l" entry of one zone, its units asked then ":" and the
// zone byte, sharing the zones of the batch's requests; its reply is a
// request's in one zone and one more element, the units granted.
TEST(ScriptBatch, Leases)
{
    std::string minute = zone_args({100, 60000, 1000}, false);
    std::string hour = zone_args({5000, 3600000, 3600000}, true);
    std::string_view keys[] = {"rl:a:1"};
    std::string_view args[] = {minute};
    bool enforce[] = {true};

    ScriptBatch batch;
    ASSERT_TRUE(batch.add_lease("rl:b:1", hour, 40));
    ASSERT_TRUE(batch.add(false, 1, keys, args, enforce));
    ASSERT_TRUE(batch.add_lease("rl:a:1", minute, ScriptBatch::kMaxCost));
    ASSERT_TRUE(batch.add_lease("rl:a:1", minute, 0));
    ASSERT_TRUE(batch.add_settle("rl:a:1", minute, -3, 28333333));
    EXPECT_EQ(batch.entries(), 5u);
    EXPECT_EQ(batch.reply_offset(0), 1u);
    EXPECT_EQ(batch.reply_offset(1), 6u);
    EXPECT_EQ(batch.reply_offset(2), 10u);
    EXPECT_EQ(batch.reply_offset(3), 15u);
    EXPECT_EQ(batch.reply_offset(4), 20u);
    EXPECT_EQ(batch.reply_elements(), 24u);

    std::vector<std::string> want = {
        "EVALSHA", std::string(window_script_sha1()), "5",
        "rl:b:1", "rl:a:1", "rl:a:1", "rl:a:1", "rl:a:1",
        "2p",
        "5000", "3600000", "1", "f", "1",
        "100", "1000", "60", "s", "1",
        std::string("l40:\0", 5), std::string("c\1", 2),
        std::string("l9007199254740992:\1", 19),
        std::string("l0:\1", 4), std::string("s-3,28333333:\1", 14),
    };
    EXPECT_EQ(arguments(batch), want);

    // More units than a Lua number holds exactly: nothing added.
    EXPECT_FALSE(batch.add_lease("rl:a:1", minute,
                                 ScriptBatch::kMaxCost + 1));
    EXPECT_EQ(batch.entries(), 5u);
    EXPECT_EQ(batch.reply_elements(), 24u);
    EXPECT_EQ(arguments(batch), want);

    batch.clear();
    ASSERT_TRUE(batch.add(false, 1, keys, args, enforce));
    EXPECT_EQ(batch.reply_elements(), 1u + 1 + 3);
}

// A zone of side mode (issue 41) is its mode's letter then its base, a
// zone apart from one of the same arguments without; its marker goes last
// in the keys, once a zone, and the layout letter's marked form says
// so, but for cross_slot, whose batch names none.  Settles and leases take
// a side too.
TEST(ScriptBatch, SideZones)
{
    std::string minute = zone_args({100, 60000, 1000}, false);
    std::string_view keys[] = {"rl:a:1", "rl:b:1"};
    std::string_view args[] = {minute, minute};
    bool enforce[] = {true, false};
    ZoneSide sides[] = {{"rl:a+", ""}, {"rl:b+", "{7}"}};
    ZoneSide none[2] = {};

    ScriptBatch batch;
    ASSERT_TRUE(batch.add(false, 2, keys, args, enforce, nullptr, nullptr,
                          sides));
    ASSERT_TRUE(batch.add(false, 2, keys, args, enforce, nullptr, nullptr,
                          none));
    ASSERT_TRUE(batch.add_settle("rl:a:2", minute, -1, 7, sides[0]));
    ASSERT_TRUE(batch.add_lease("rl:a:3", minute, 5, sides[0]));
    EXPECT_EQ(batch.reply_elements(), 1u + 7 + 7 + 4 + 5);

    std::vector<std::string> want = {
        "EVALSHA", std::string(window_script_sha1()), "8",
        "rl:a:1", "rl:b:1", "rl:a:1", "rl:b:1", "rl:a:2", "rl:a:3",
        "rl:a+", "rl:b+{7}",
        "4P",
        "100", "1000", "60", "s", "3rl:a+",
        "100", "1000", "60", "s", "2rl:b+",
        "100", "1000", "60", "s", "1",
        "100", "1000", "60", "s", "0",
        std::string("c\0\1", 3), std::string("c\2\3", 3),
        std::string("s-1,7:\0", 7), std::string("l5:\0", 4),
    };
    EXPECT_EQ(arguments(batch), want);

    // Cross-slot: no markers, every side zone reads its side keys.
    want.erase(want.begin() + 9, want.begin() + 11);
    want[0] = "EVAL";
    want[1] = std::string(cross_slot_script());
    want[2] = "6";
    want[9] = "4p";
    want.insert(want.begin() + 2, "0");
    EXPECT_EQ(arguments(batch, ScriptBatch::Form::kEval, true), want);

    batch.clear();
    ASSERT_TRUE(batch.add(false, 2, keys, args, enforce));
    EXPECT_EQ(arguments(batch)[5], "2p");
}

// A zone that bans (issue 43) is its mode's letter, the ban's length in
// ms and ":" before its base, a zone apart from one without a ban or
// with another; a dry-run zone sends no ban, so its descriptor is the
// side zone's.
TEST(ScriptBatch, BanningZones)
{
    std::string minute = zone_args({100, 60000, 1000}, false);
    std::string_view keys[] = {"rl:a:1"};
    std::string_view args[] = {minute};
    bool enforce[] = {true};
    bool dry[] = {false};
    ZoneSide ban[] = {{"rl:a+", "", 3600000}};
    ZoneSide other[] = {{"rl:a+", "", 60000}};
    ZoneSide side[] = {{"rl:a+", ""}};

    ScriptBatch batch;
    ASSERT_TRUE(batch.add(false, 1, keys, args, enforce, nullptr, nullptr,
                          ban));
    ASSERT_TRUE(batch.add(false, 1, keys, args, enforce, nullptr, nullptr,
                          ban));
    ASSERT_TRUE(batch.add(false, 1, keys, args, enforce, nullptr, nullptr,
                          other));
    ASSERT_TRUE(batch.add(false, 1, keys, args, enforce, nullptr, nullptr,
                          side));
    ASSERT_TRUE(batch.add(false, 1, keys, args, dry, nullptr, nullptr, ban));
    ASSERT_TRUE(batch.add(false, 1, keys, args, dry, nullptr, nullptr,
                          side));

    std::vector<std::string> got = arguments(batch);
    std::vector<std::string> modes;

    for (std::size_t i = 0; i < 4; i++) {
        modes.push_back(got[3 + 6 + 4 + 1 + 5 * i + 4]);
    }

    EXPECT_EQ(got[3 + 6 + 4], "4P");
    EXPECT_EQ(modes, (std::vector<std::string>{
                         "43600000:rl:a+", "460000:rl:a+", "3rl:a+",
                         "2rl:a+"}));
    EXPECT_EQ(got.back(), std::string("c\3", 2));
    EXPECT_EQ(got[got.size() - 5], std::string("c\0", 2));
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
        "1p", "1", "1000", "1", "f", "1", std::string("c\0", 2),
    };
    EXPECT_EQ(arguments(batch), want);

    // New keys hashes: the letter says so.
    want[4] = "1h";
    EXPECT_EQ(arguments(batch, ScriptBatch::Form::kEvalSha, false, false),
              want);
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

    std::vector<std::string> got = arguments(batch);
    ASSERT_EQ(got.size(), 11u);
    EXPECT_EQ(got[5], "18446744073709551615");
    EXPECT_EQ(got[6], "1");
    EXPECT_EQ(got[7], "18446744073709551615");
}

TEST(ScriptBatch, ManyRequestsOneZone)
{
    std::string args = zone_args({10, 1000, 1000}, false);
    ScriptBatch batch;
    std::vector<std::string> keys;

    for (int i = 0; i < 500; i++) {
        keys.push_back(std::string(300, static_cast<char>('a' + i % 26))
                       + std::to_string(i));
    }
    for (std::size_t i = 0; i < keys.size(); i++) {
        std::string_view key[] = {keys[i]};
        std::string_view zone[] = {args};
        bool enforce[] = {true};
        ASSERT_TRUE(batch.add(i % 3 == 0, 1, key, zone, enforce));
    }

    std::vector<std::string> got = arguments(batch);
    ASSERT_EQ(got.size(), 3 + 500 + 1 + 5 + 500u);
    EXPECT_EQ(got[2], "500");
    EXPECT_EQ(got[503], "1p");
    for (std::size_t i = 0; i < keys.size(); i++) {
        EXPECT_EQ(got[3 + i], keys[i]);
        EXPECT_EQ(got[509 + i], std::string(i % 3 == 0 ? "p" : "c") + '\0');
    }
}

// A zone whose limit is a variable gives each request the arguments of
// its own limit, written where the request keeps them: requests of one
// subject under different limits are each decided under their own, and
// requests under the same limit share one zone of the batch, wherever
// their bytes lie.  A request's bytes need not outlive add(): the batch
// compares with its copy (a buffer written again for the next request
// with another limit is another zone).
TEST(ScriptBatch, ZonesAreTheirBytes)
{
    std::string_view key[] = {"rl:plans:k1"};
    bool enforce[] = {true};
    ScriptBatch batch;
    char buffer[kZoneArgsMaxSize];
    const std::uint64_t limits[] = {5, 100, 5, 100, 7};

    for (std::uint64_t limit : limits) {
        std::string_view zone[] = {
            {buffer, write_zone_args({limit, 60000, 1000}, buffer)}};
        ASSERT_TRUE(batch.add(false, 1, key, zone, enforce));
    }

    // A zone with a constant limit of 100, its bytes elsewhere: the same.
    std::string hundred = zone_args({100, 60000, 1000}, false);
    std::string_view zone[] = {hundred};
    ASSERT_TRUE(batch.add(false, 1, key, zone, enforce));

    std::vector<std::string> want = {
        "EVALSHA", std::string(window_script_sha1()), "6",
        "rl:plans:k1", "rl:plans:k1", "rl:plans:k1", "rl:plans:k1",
        "rl:plans:k1", "rl:plans:k1",
        "3p",
        "5", "1000", "60", "s", "1",
        "100", "1000", "60", "s", "1",
        "7", "1000", "60", "s", "1",
        std::string("c\0", 2), std::string("c\1", 2), std::string("c\0", 2),
        std::string("c\1", 2), std::string("c\2", 2), std::string("c\1", 2),
    };
    EXPECT_EQ(arguments(batch), want);
}

// An interval peek: "i", the bucket counts, ":", the zone bytes; its reply
// has one more element per zone than a peek's.
TEST(ScriptBatch, IntervalPeekEntry)
{
    std::string minute = zone_args({100, 60000, 1000}, false);
    std::string day = zone_args({5000, 86400000, 86400000}, true);
    std::string_view keys[] = {"rl:a:1", "rl:b:1"};
    std::string_view args[] = {minute, day};
    bool enforce[] = {true, true};
    const std::uint64_t buckets[] = {20, 1};
    const std::uint64_t largest[] = {UINT64_MAX};

    ScriptBatch batch;
    ASSERT_TRUE(batch.add(false, 1, keys, args, enforce));
    ASSERT_TRUE(batch.add(true, 2, keys, args, enforce, buckets));
    EXPECT_EQ(batch.reply_offset(1), 5u);
    EXPECT_EQ(batch.reply_elements(), 5u + 1 + 4 * 2);
    ASSERT_TRUE(batch.add(true, 1, keys + 1, args + 1, enforce, largest));
    EXPECT_EQ(batch.reply_offset(2), 14u);
    EXPECT_EQ(batch.reply_elements(), 14u + 1 + 4);

    // Counting, it is refused whole.
    EXPECT_FALSE(batch.add(false, 2, keys, args, enforce, buckets));
    EXPECT_EQ(batch.entries(), 3u);
    EXPECT_EQ(batch.reply_elements(), 19u);

    std::vector<std::string> got = arguments(batch);
    ASSERT_EQ(got.size(), 3 + 4 + 1 + 2 * 5 + 3u);
    EXPECT_EQ(got[got.size() - 3], std::string("c\0", 2));
    EXPECT_EQ(got[got.size() - 2], std::string("i20,1:\0\1", 8));
    EXPECT_EQ(got[got.size() - 1], "i18446744073709551615:\1");

    batch.clear();
    ASSERT_TRUE(batch.add(true, 1, keys, args, enforce));
    EXPECT_EQ(batch.reply_elements(), 1u + 1 + 3);
}

// Each zone costs a byte in its request's entry: a batch names at most
// kMaxZoneDescriptors of them, and a request that would pass that is
// refused whole, leaving the batch as it was.
TEST(ScriptBatch, AtMostMaxZoneDescriptors)
{
    std::vector<std::string> zones;
    for (std::size_t i = 0; i < ScriptBatch::kMaxZoneDescriptors + 8; i++) {
        zones.push_back(zone_args({i + 1, 1000, 1000}, false));
    }

    ScriptBatch batch;
    std::size_t next = 0;
    LargestRequest request;

    while (next + kMaxZonesPerRequest <= ScriptBatch::kMaxZoneDescriptors) {
        EXPECT_TRUE(batch.has_room(kMaxZonesPerRequest));
        for (std::size_t i = 0; i < kMaxZonesPerRequest; i++) {
            request.args[i] = zones[next + i];
        }
        ASSERT_TRUE(request.add_to(batch, false, kMaxZonesPerRequest));
        next += kMaxZonesPerRequest;
    }
    EXPECT_EQ(next, ScriptBatch::kMaxZoneDescriptors);
    EXPECT_FALSE(batch.has_room(1));

    // One new zone too many, even with known ones beside it.
    request.args[0] = zones[0];
    request.args[1] = zones[next];
    std::vector<std::string> before = arguments(batch);
    std::size_t elements = batch.reply_elements();
    EXPECT_FALSE(request.add_to(batch, false, 2));
    EXPECT_EQ(arguments(batch), before);
    EXPECT_EQ(batch.reply_elements(), elements);

    // Known zones only: still fine, and the last one is numbered 255.  The
    // refused request left no reply behind either: the next ones' replies
    // start where its would have and follow on.
    request.args[0] = zones[0];
    request.args[1] = zones[next - 1];
    for (std::size_t offset : {elements, elements + 1 + 2 * kRepliesPerZone}) {
        ASSERT_TRUE(request.add_to(batch, true, 2));
        EXPECT_EQ(batch.reply_offset(batch.entries() - 1), offset);
    }
    std::vector<std::string> got = arguments(batch);
    EXPECT_EQ(got.back(), std::string("p\0\xff", 3));
}

// The script's flat reply: the time, then per request rejected and
// kRepliesPerZone elements per zone.  A zone shared by requests is named
// once in the command but answered for each of them.
TEST(ScriptBatch, ReplyLayout)
{
    std::string args = zone_args({10, 1000, 1000}, false);
    const LargestRequest request(args);

    ScriptBatch batch;
    EXPECT_EQ(batch.reply_elements(), 1u);

    // Each request's zones, then where its reply starts and the reply's
    // length with it.
    const struct {
        std::size_t zones, offset, elements;
    } kRequests[] = {
        {2, 1, 8},
        {1, 8, 12},
        {3, 12, 22},
        {kMaxZonesPerRequest, 22, 22 + 1 + 3 * kMaxZonesPerRequest},
        {1, 71, 75},
    };
    for (const auto &want : kRequests) {
        SCOPED_TRACE(want.offset);
        ASSERT_TRUE(request.add_to(batch, false, want.zones));
        EXPECT_EQ(batch.reply_offset(batch.entries() - 1), want.offset);
        EXPECT_EQ(batch.reply_elements(), want.elements);
    }

    // Refused for their zone counts, without a trace.
    EXPECT_FALSE(request.add_to(batch, false, 0));
    EXPECT_FALSE(request.add_to(batch, false, kMaxZonesPerRequest + 1));
    EXPECT_EQ(batch.entries(), std::size(kRequests));
    EXPECT_EQ(batch.reply_elements(), 75u);
    for (std::size_t i = 0; i < std::size(kRequests); i++) {
        EXPECT_EQ(batch.reply_offset(i), kRequests[i].offset) << i;
    }

    // Afresh: the second request follows the first, not the old second.
    batch.clear();
    EXPECT_EQ(batch.reply_elements(), 1u);
    ASSERT_TRUE(request.add_to(batch, false, 1));
    ASSERT_TRUE(request.add_to(batch, false, 1));
    EXPECT_EQ(batch.reply_offset(0), 1u);
    EXPECT_EQ(batch.reply_offset(1), 5u);
    EXPECT_EQ(batch.reply_elements(), 9u);
}

}  // namespace
}  // namespace ratelimit
