#include "window_script.hpp"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

namespace ratelimit {
namespace {

using Kind = ScriptReply::Kind;

struct ReplyDeleter {
    void operator()(redisReply *r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

// The reply hiredis's reader makes of `resp`, or null if the bytes are not
// a complete reply or not valid RESP.
ReplyPtr parse(std::string_view resp)
{
    redisReader *rd = redisReaderCreate();
    void *reply = nullptr;

    if (redisReaderFeed(rd, resp.data(), resp.size()) != REDIS_OK
        || redisReaderGetReply(rd, &reply) != REDIS_OK)
    {
        reply = nullptr;
    }
    redisReaderFree(rd);
    return ReplyPtr(static_cast<redisReply *>(reply));
}

ReplyPtr must_parse(std::string_view resp)
{
    ReplyPtr r = parse(resp);
    EXPECT_NE(r, nullptr) << "hiredis did not parse: " << resp;
    return r;
}

std::string integer(long long v)
{
    return ":" + std::to_string(v) + "\r\n";
}

std::string array_of(const std::vector<std::string> &items)
{
    std::string out = "*" + std::to_string(items.size()) + "\r\n";
    for (const std::string &item : items) {
        out += item;
    }
    return out;
}

const char kOneZone[] =
    "*5\r\n:1700000000123\r\n:0\r\n:3\r\n:1700000000\r\n:0\r\n";

TEST(DecodeScriptReply, OneZonePassed)
{
    ReplyPtr r = must_parse(kOneZone);
    ASSERT_NE(r, nullptr);
    ZoneCount counts[1] = {{99, 99, true}};

    ScriptReply out = decode_script_reply(r.get(), 1, counts);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    EXPECT_EQ(out.now_ms, 1700000000123u);
    EXPECT_FALSE(out.rejected);
    EXPECT_EQ(counts[0].total, 3u);
    EXPECT_EQ(counts[0].oldest, 1700000000u);
    EXPECT_FALSE(counts[0].over);
}

TEST(DecodeScriptReply, TwoZonesRejected)
{
    ReplyPtr r = must_parse(array_of({
        integer(1700000000999), integer(1),
        integer(10), integer(1699999941), integer(1),
        integer(0), integer(0), integer(0),
    }));
    ASSERT_NE(r, nullptr);
    ZoneCount counts[3] = {{7, 7, false}, {7, 7, true}, {42, 43, true}};

    ScriptReply out = decode_script_reply(r.get(), 2, counts);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    EXPECT_EQ(out.now_ms, 1700000000999u);
    EXPECT_TRUE(out.rejected);
    EXPECT_EQ(counts[0].total, 10u);
    EXPECT_EQ(counts[0].oldest, 1699999941u);
    EXPECT_TRUE(counts[0].over);
    EXPECT_EQ(counts[1].total, 0u);
    EXPECT_EQ(counts[1].oldest, 0u);
    EXPECT_FALSE(counts[1].over);
    // Not one of the `zones` entries: left alone.
    EXPECT_EQ(counts[2].total, 42u);
    EXPECT_EQ(counts[2].oldest, 43u);
    EXPECT_TRUE(counts[2].over);
}

TEST(DecodeScriptReply, OverWithoutRejection)
{
    ReplyPtr r = must_parse(array_of({
        integer(5000), integer(0),
        integer(4), integer(2), integer(0),
        integer(9), integer(3), integer(1),
    }));
    ASSERT_NE(r, nullptr);
    ZoneCount counts[2] = {};

    ScriptReply out = decode_script_reply(r.get(), 2, counts);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    EXPECT_FALSE(out.rejected);
    EXPECT_FALSE(counts[0].over);
    EXPECT_TRUE(counts[1].over);
    EXPECT_EQ(counts[1].total, 9u);
    EXPECT_EQ(counts[1].oldest, 3u);
}

TEST(DecodeScriptReply, LargestInteger)
{
    ReplyPtr r = must_parse(array_of({
        integer(INT64_MAX), integer(0),
        integer(INT64_MAX), integer(INT64_MAX), integer(0),
    }));
    ASSERT_NE(r, nullptr);
    ZoneCount counts[1] = {};

    ScriptReply out = decode_script_reply(r.get(), 1, counts);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    EXPECT_EQ(out.now_ms, std::uint64_t{INT64_MAX});
    EXPECT_EQ(counts[0].total, std::uint64_t{INT64_MAX});
    EXPECT_EQ(counts[0].oldest, std::uint64_t{INT64_MAX});
}

TEST(DecodeScriptReply, MaxZones)
{
    std::vector<std::string> items = {integer(123456), integer(0)};
    for (std::size_t i = 0; i < kMaxZonesPerRequest; i++) {
        items.push_back(integer(static_cast<long long>(i + 1)));
        items.push_back(integer(static_cast<long long>(1000 + i)));
        items.push_back(integer(0));
    }
    ReplyPtr r = must_parse(array_of(items));
    ASSERT_NE(r, nullptr);
    ZoneCount counts[kMaxZonesPerRequest] = {};

    ScriptReply out = decode_script_reply(r.get(), kMaxZonesPerRequest,
                                          counts);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    for (std::size_t i = 0; i < kMaxZonesPerRequest; i++) {
        EXPECT_EQ(counts[i].total, i + 1);
        EXPECT_EQ(counts[i].oldest, 1000 + i);
        EXPECT_FALSE(counts[i].over);
    }
}

TEST(DecodeScriptReply, OtherError)
{
    const char text[] = "ERR Error running script (call to f_0123): "
                        "@user_script:1: OOM command not allowed";
    ReplyPtr r = must_parse(std::string("-") + text + "\r\n");
    ASSERT_NE(r, nullptr);
    ZoneCount counts[1] = {};

    ScriptReply out = decode_script_reply(r.get(), 1, counts);
    EXPECT_EQ(out.kind, Kind::kError);
    EXPECT_EQ(out.error, text);
    EXPECT_EQ(out.error.data(), r->str);
}

using BatchKind = BatchReply::Kind;

TEST(DecodeBatchReply, OneReplyPerRequest)
{
    ReplyPtr r = must_parse(array_of({kOneZone, "-ERR x\r\n", kOneZone}));
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(decode_batch_reply(r.get(), 3).kind, BatchKind::kReplies);

    ZoneCount counts[1] = {};
    EXPECT_EQ(decode_script_reply(r->element[0], 1, counts).kind,
              Kind::kVerdict);
    EXPECT_EQ(decode_script_reply(r->element[1], 1, counts).kind,
              Kind::kError);
}

TEST(DecodeBatchReply, WrongShapeIsMalformed)
{
    EXPECT_EQ(decode_batch_reply(nullptr, 1).kind, BatchKind::kMalformed);

    for (const char *resp : {":5\r\n", "+OK\r\n", "$-1\r\n", "*-1\r\n",
                             "$5\r\nhello\r\n", "*0\r\n",
                             "*2\r\n:1\r\n:2\r\n"})
    {
        SCOPED_TRACE(resp);
        ReplyPtr r = must_parse(resp);
        ASSERT_NE(r, nullptr);
        EXPECT_EQ(decode_batch_reply(r.get(), 1).kind, BatchKind::kMalformed);
    }
}

TEST(DecodeBatchReply, NoScript)
{
    const char text[] = "NOSCRIPT No matching script. Please use EVAL.";
    ReplyPtr r = must_parse(std::string("-") + text + "\r\n");
    ASSERT_NE(r, nullptr);

    BatchReply out = decode_batch_reply(r.get(), 4);
    EXPECT_EQ(out.kind, BatchKind::kNoScript);
    EXPECT_EQ(out.error, text);
}

TEST(DecodeBatchReply, ErrorsThatAreNotNoScript)
{
    for (const char *text : {"NOSCRIP", "noscript x", "ERR NOSCRIPT", "",
                             "BUSY Redis is busy running a script."})
    {
        SCOPED_TRACE(text);
        ReplyPtr r = must_parse(std::string("-") + text + "\r\n");
        ASSERT_NE(r, nullptr);

        BatchReply out = decode_batch_reply(r.get(), 1);
        EXPECT_EQ(out.kind, BatchKind::kError);
        EXPECT_EQ(out.error, text);
    }
}

TEST(DecodeScriptReply, NoScriptIsJustAnError)
{
    ReplyPtr r = must_parse("-NOSCRIPT x\r\n");
    ASSERT_NE(r, nullptr);
    ZoneCount counts[1] = {};
    EXPECT_EQ(decode_script_reply(r.get(), 1, counts).kind, Kind::kError);
}

TEST(DecodeScriptReply, NullIsMalformed)
{
    ZoneCount counts[1] = {};
    EXPECT_EQ(decode_script_reply(nullptr, 1, counts).kind, Kind::kMalformed);
}

TEST(DecodeScriptReply, WrongTopLevelType)
{
    for (const char *resp : {":5\r\n", "+OK\r\n", "$-1\r\n", "*-1\r\n",
                             "$5\r\nhello\r\n", "*0\r\n"})
    {
        SCOPED_TRACE(resp);
        ReplyPtr r = must_parse(resp);
        ASSERT_NE(r, nullptr);
        ZoneCount counts[1] = {};
        EXPECT_EQ(decode_script_reply(r.get(), 1, counts).kind,
                  Kind::kMalformed);
    }
}

TEST(DecodeScriptReply, WrongElementCount)
{
    ReplyPtr one = must_parse(kOneZone);
    ASSERT_NE(one, nullptr);
    ZoneCount counts[3] = {};

    EXPECT_EQ(decode_script_reply(one.get(), 0, counts).kind,
              Kind::kMalformed);
    EXPECT_EQ(decode_script_reply(one.get(), 2, counts).kind,
              Kind::kMalformed);

    for (int n : {0, 1, 2, 3, 4, 6, 7, 8}) {
        SCOPED_TRACE(n);
        std::vector<std::string> items(static_cast<std::size_t>(n),
                                       integer(0));
        ReplyPtr r = must_parse(array_of(items));
        ASSERT_NE(r, nullptr);
        EXPECT_EQ(decode_script_reply(r.get(), 1, counts).kind,
                  Kind::kMalformed);
    }
}

TEST(DecodeScriptReply, ZeroZones)
{
    ReplyPtr r = must_parse("*2\r\n:77\r\n:1\r\n");
    ASSERT_NE(r, nullptr);

    ScriptReply out = decode_script_reply(r.get(), 0, nullptr);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    EXPECT_EQ(out.now_ms, 77u);
    EXPECT_TRUE(out.rejected);
}

// The good two-zone reply with element `at` replaced by `bad`.
std::string with_element(std::size_t at, const std::string &bad)
{
    std::vector<std::string> items = {
        integer(1700000000123), integer(0),
        integer(3), integer(1700000000), integer(0),
        integer(1), integer(1700000000), integer(0),
    };
    items[at] = bad;
    return array_of(items);
}

TEST(DecodeScriptReply, BadElementAnywhereIsMalformed)
{
    const std::string bad[] = {
        "$1\r\n1\r\n",          // a string holding a number
        "$0\r\n\r\n",
        "+1\r\n",
        "-ERR inner\r\n",
        "$-1\r\n",              // nil
        "*-1\r\n",              // nil array
        "*0\r\n",
        "*1\r\n:1\r\n",         // nested
        "*2\r\n*1\r\n:0\r\n:1\r\n",
        ":-1\r\n",
        ":-9223372036854775808\r\n",
    };

    for (std::size_t at = 0; at < 8; at++) {
        for (const std::string &b : bad) {
            SCOPED_TRACE("element " + std::to_string(at) + ": " + b);
            ReplyPtr r = must_parse(with_element(at, b));
            ASSERT_NE(r, nullptr);
            ZoneCount counts[2] = {};
            EXPECT_EQ(decode_script_reply(r.get(), 2, counts).kind,
                      Kind::kMalformed);
        }
    }
}

TEST(DecodeScriptReply, FlagsAboveOneAreMalformed)
{
    // Element 1 is the rejected flag, 4 and 7 the zones' over flags.
    const long long kFlags[] = {2, 3, 255, INT64_MAX};
    for (std::size_t at : {1, 4, 7}) {
        for (long long v : kFlags) {
            SCOPED_TRACE(std::to_string(at) + " = " + std::to_string(v));
            ReplyPtr r = must_parse(with_element(at, integer(v)));
            ASSERT_NE(r, nullptr);
            ZoneCount counts[2] = {};
            EXPECT_EQ(decode_script_reply(r.get(), 2, counts).kind,
                      Kind::kMalformed);
        }
    }

    for (std::size_t at : {1, 4, 7}) {
        ReplyPtr r = must_parse(with_element(at, integer(1)));
        ASSERT_NE(r, nullptr);
        ZoneCount counts[2] = {};
        ScriptReply out = decode_script_reply(r.get(), 2, counts);
        EXPECT_EQ(out.kind, Kind::kVerdict) << at;
        EXPECT_EQ(out.rejected, at == 1);
        EXPECT_EQ(counts[0].over, at == 4);
        EXPECT_EQ(counts[1].over, at == 7);
    }
}

// What decode_script_reply must answer, worked out from the header alone.
struct Expected {
    explicit Expected(Kind k) : kind(k) {}

    Kind kind;
    std::uint64_t now_ms = 0;
    bool rejected = false;
    std::vector<ZoneCount> counts;
};

bool good_count(const redisReply *e, std::uint64_t max, std::uint64_t *out)
{
    if (e == nullptr || e->type != REDIS_REPLY_INTEGER || e->integer < 0
        || static_cast<std::uint64_t>(e->integer) > max)
    {
        return false;
    }
    *out = static_cast<std::uint64_t>(e->integer);
    return true;
}

Expected expected_for(const redisReply *r, std::size_t zones)
{
    if (r->type == REDIS_REPLY_ERROR) {
        return Expected(Kind::kError);
    }

    Expected malformed(Kind::kMalformed);
    if (r->type != REDIS_REPLY_ARRAY
        || r->elements != 2 + kRepliesPerZone * zones)
    {
        return malformed;
    }

    constexpr std::uint64_t kAny = UINT64_MAX;
    Expected e(Kind::kVerdict);
    std::uint64_t rejected;
    if (!good_count(r->element[0], kAny, &e.now_ms)
        || !good_count(r->element[1], 1, &rejected))
    {
        return malformed;
    }
    e.rejected = rejected == 1;

    for (std::size_t i = 0; i < zones; i++) {
        redisReply **z = r->element + 2 + 3 * i;
        ZoneCount c;
        std::uint64_t over;
        if (!good_count(z[0], kAny, &c.total)
            || !good_count(z[1], kAny, &c.oldest)
            || !good_count(z[2], 1, &over))
        {
            return malformed;
        }
        c.over = over == 1;
        e.counts.push_back(c);
    }
    return e;
}

// hiredis 0.14 allocates an array's element table as soon as it reads the
// count, so a mutated "*5" grown to many digits could ask for gigabytes.
bool has_huge_array_count(const std::string &resp)
{
    for (std::size_t i = 0; i < resp.size(); i++) {
        if (resp[i] != '*') {
            continue;
        }
        std::size_t j = i + 1, digits = 0;
        while (j < resp.size() && (resp[j] == '-' || resp[j] == '+')) {
            j++;
        }
        while (j < resp.size() && resp[j] >= '0' && resp[j] <= '9') {
            j++;
            digits++;
        }
        if (digits > 4) {
            return true;
        }
    }
    return false;
}

std::string random_valid_reply(std::mt19937 &rng, std::size_t zones)
{
    auto pick = [&](long long lo, long long hi) {
        return std::uniform_int_distribution<long long>(lo, hi)(rng);
    };
    std::vector<std::string> items = {integer(pick(0, 1LL << 45)),
                                      integer(pick(0, 1))};
    for (std::size_t i = 0; i < zones; i++) {
        items.push_back(integer(pick(0, 100000)));
        items.push_back(integer(pick(0, 1LL << 40)));
        items.push_back(integer(pick(0, 1)));
    }
    return array_of(items);
}

std::string mutate(std::mt19937 &rng, std::string s)
{
    static const char kAlphabet[] = "*:$-+\r\n0123456789012NOSCRIPT x";
    auto below = [&](std::size_t n) {
        return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
    };
    auto some_char = [&]() {
        return below(4) == 0 ? static_cast<char>(below(256))
                             : kAlphabet[below(sizeof(kAlphabet) - 1)];
    };

    std::size_t edits = 1 + below(4);
    for (std::size_t k = 0; k < edits; k++) {
        switch (below(5)) {
        case 0:
            if (!s.empty()) {
                s[below(s.size())] = some_char();
            }
            break;
        case 1:
            s.insert(s.begin() + static_cast<long>(below(s.size() + 1)),
                     some_char());
            break;
        case 2:
            if (!s.empty()) {
                s.erase(below(s.size()), 1 + below(3));
            }
            break;
        case 3: {
            static const char *kPieces[] = {
                ":0\r\n", ":1\r\n", ":2\r\n", ":-1\r\n", "$-1\r\n",
                "*-1\r\n", "*1\r\n:1\r\n", "$1\r\n1\r\n", "+OK\r\n",
                "-NOSCRIPT x\r\n", "-ERR x\r\n",
            };
            std::string piece = kPieces[below(std::size(kPieces))];
            s.insert(below(s.size() + 1), piece);
            break;
        }
        default: {
            // Swap the element count for a nearby one.
            if (s.size() > 1 && s[0] == '*') {
                std::size_t end = s.find('\r');
                if (end != std::string::npos) {
                    s.replace(1, end - 1, std::to_string(below(12)));
                }
            }
            break;
        }
        }
    }
    return s;
}

std::string random_bytes(std::mt19937 &rng)
{
    static const char kAlphabet[] = "*:$-+\r\n0123456789";
    std::uniform_int_distribution<std::size_t> len(0, 40);
    std::uniform_int_distribution<std::size_t> pick(0, sizeof(kAlphabet) - 2);
    std::uniform_int_distribution<int> byte(0, 255);
    std::string s(len(rng), '\0');
    for (char &c : s) {
        c = byte(rng) < 200 ? kAlphabet[pick(rng)]
                            : static_cast<char>(byte(rng));
    }
    return s;
}

TEST(DecodeScriptReply, Fuzz)
{
    std::mt19937 rng(20240611);
    std::uniform_int_distribution<std::size_t> zones_of(0, 4);
    int parsed = 0, verdicts = 0, errors = 0;

    for (int iter = 0; iter < 20000; iter++) {
        std::size_t zones = zones_of(rng);
        std::string resp;
        switch (iter % 4) {
        case 0:
            resp = random_valid_reply(rng, zones);
            break;
        case 3:
            resp = random_bytes(rng);
            break;
        default:
            resp = mutate(rng, random_valid_reply(rng, zones_of(rng)));
            break;
        }
        if (has_huge_array_count(resp)) {
            continue;
        }

        ReplyPtr r = parse(resp);
        if (r == nullptr) {
            continue;
        }
        parsed++;

        ZoneCount counts[kMaxZonesPerRequest + 1];
        for (ZoneCount &c : counts) {
            c = {0xdead, 0xbeef, true};
        }
        ScriptReply out = decode_script_reply(r.get(), zones, counts);
        Expected want = expected_for(r.get(), zones);

        SCOPED_TRACE(testing::PrintToString(resp) + " zones "
                     + std::to_string(zones));
        ASSERT_EQ(out.kind, want.kind);
        if (out.kind == Kind::kVerdict) {
            verdicts++;
            EXPECT_EQ(out.now_ms, want.now_ms);
            EXPECT_EQ(out.rejected, want.rejected);
            for (std::size_t i = 0; i < zones; i++) {
                EXPECT_EQ(counts[i].total, want.counts[i].total);
                EXPECT_EQ(counts[i].oldest, want.counts[i].oldest);
                EXPECT_EQ(counts[i].over, want.counts[i].over);
            }
        } else if (out.kind != Kind::kMalformed) {
            errors++;
            EXPECT_EQ(out.error, std::string_view(r->str, r->len));
        }
        for (std::size_t i = zones; i <= kMaxZonesPerRequest; i++) {
            EXPECT_EQ(counts[i].total, 0xdeadu) << "wrote entry " << i;
        }
    }

    // The generator must reach every branch for the test to mean much.
    EXPECT_GT(parsed, 5000);
    EXPECT_GT(verdicts, 3000);
    EXPECT_GT(errors, 10);
}

}  // namespace
}  // namespace ratelimit
