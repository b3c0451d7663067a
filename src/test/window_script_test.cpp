#include "scripts/window_script.hpp"

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "limits/window_rules.hpp"
#include "resp_parse.hpp"

namespace ratelimit {
namespace {

using Kind = ScriptReply::Kind;
using BatchKind = BatchReply::Kind;

ReplyPtr must_parse(std::string_view resp)
{
    ReplyPtr r = parse(resp);
    EXPECT_NE(r, nullptr) << "not RESP: " << resp;
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

// One request's reply as the script writes it: rejected, then per zone the
// count, the oldest bucket and over.
std::vector<std::string> verdict(bool rejected,
                                 const std::vector<ZoneCount> &zones)
{
    std::vector<std::string> items = {integer(rejected)};
    for (const ZoneCount &z : zones) {
        items.push_back(integer(static_cast<long long>(z.total)));
        items.push_back(integer(static_cast<long long>(z.oldest)));
        items.push_back(integer(z.over));
    }
    return items;
}

// The reply of a request the script failed on: the error in place of
// rejected, zeros after it.
std::vector<std::string> failed(const std::string &text, std::size_t zones)
{
    std::vector<std::string> items(1 + kRepliesPerZone * zones, integer(0));
    items[0] = "-" + text + "\r\n";
    return items;
}

// A batch's flat reply: the time, then every request's elements, then the
// tail's overrides (entry, zone, limit, window, left).
std::string batch_of(long long now_ms,
                     const std::vector<std::vector<std::string>> &requests,
                     const std::vector<std::vector<long long>> &tail = {})
{
    std::vector<std::string> items = {integer(now_ms)};
    for (const std::vector<std::string> &request : requests) {
        items.insert(items.end(), request.begin(), request.end());
    }
    for (const std::vector<long long> &told : tail) {
        for (long long v : told) {
            items.push_back(integer(v));
        }
    }
    return array_of(items);
}

// The decoder wrote `want` for zone `zone`.
void expect_count(const ZoneCount &got, const ZoneCount &want,
                  std::size_t zone)
{
    EXPECT_EQ(got.total, want.total) << "zone " << zone;
    EXPECT_EQ(got.oldest, want.oldest) << "zone " << zone;
    EXPECT_EQ(got.over, want.over) << "zone " << zone;
}

// Elements the script never sends where it sends a number.
const char *const kBadElements[] = {
    "$1\r\n1\r\n",   // a string holding a number
    "$0\r\n\r\n",
    "+1\r\n",
    "-ERR inner\r\n",
    "$-1\r\n",       // nil
    "*-1\r\n",       // nil array
    "*0\r\n",
    "*1\r\n:1\r\n",  // nested
    "*2\r\n*1\r\n:0\r\n:1\r\n",
    ":-1\r\n",
    ":-9223372036854775808\r\n",
};

// A batch of one one-zone request, which starts at element 1.
const char kOneZone[] =
    "*5\r\n:1700000000123\r\n:0\r\n:3\r\n:1700000000\r\n:0\r\n";

// The script refuses the zone numbers the Redis module refuses: it states
// window_rules' bounds in its own text, limit 0 a side zone's only, read
// after its mode.
TEST(WindowScript, StatesTheZoneBounds)
{
    std::string_view script = window_script();
    std::size_t bounds =
        script.find("(whole(limit[d],2^53)or side[d]and limit[d]==0)");

    EXPECT_EQ(window_rules::kMaxLimit, std::uint64_t{1} << 53);
    EXPECT_TRUE(window_rules::zone_numbers_valid(0, 1, 1, true));
    EXPECT_FALSE(window_rules::zone_numbers_valid(0, 1, 1, false));
    ASSERT_NE(bounds, script.npos);
    EXPECT_LT(script.find("side[d]="), bounds);
    EXPECT_NE(script.find("local W="
                          + std::to_string(window_rules::kMaxWindowMs)
                          + "\n"),
              script.npos);
}

// A calendar zone's period ends too: whole numbers to 2^53, in order,
// checked before its limit, its bucket that of its period's last ms.
TEST(WindowScript, StatesTheCalendarBounds)
{
    std::string_view script = window_script();
    std::size_t ends =
        script.find("if not(whole(a,2^53)and whole(b,2^53)and a<b)then");

    EXPECT_EQ(window_rules::kMaxPeriodEndMs, std::uint64_t{1} << 53);
    ASSERT_NE(ends, script.npos);
    EXPECT_LT(ends, script.find("(whole(limit[d],2^53)or side[d]"));
    EXPECT_NE(script.find("at=now<a and a - 1 or now<b and b - 1\n"),
              script.npos);
}

TEST(DecodeScriptReply, OneZonePassed)
{
    ReplyPtr r = must_parse(kOneZone);
    ASSERT_NE(r, nullptr);
    ZoneCount counts[1] = {{99, 99, true}};

    ScriptReply out = decode_script_reply(r->element + 1, 1, counts);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    EXPECT_FALSE(out.rejected);
    expect_count(counts[0], {3, 1700000000, false}, 0);
}

// A settle's reply: 0, the count and oldest bucket after it, the units it
// applied, which may be negative or 0.
TEST(DecodeSettleReply, AppliedUnitsSigned)
{
    for (long long units : {40LL, -6LL, 0LL}) {
        ReplyPtr r = must_parse(array_of({integer(0), integer(12),
                                          integer(1700000000),
                                          integer(units)}));
        std::int64_t applied = 99;

        ASSERT_EQ(decode_settle_reply(r->element, &applied).kind,
                  Kind::kVerdict);
        EXPECT_EQ(applied, units);
    }

    ReplyPtr error = must_parse(array_of(failed("WRONGTYPE Operation against "
                                                "a key", 1)));
    std::int64_t applied = 0;
    ScriptReply out = decode_settle_reply(error->element, &applied);
    EXPECT_EQ(out.kind, Kind::kError);
    EXPECT_EQ(out.error, "WRONGTYPE Operation against a key");

    ReplyPtr rejected = must_parse(array_of({integer(1), integer(1),
                                             integer(1), integer(1)}));
    EXPECT_EQ(decode_settle_reply(rejected->element, &applied).kind,
              Kind::kMalformed);
}

// A lease's reply: a request's in one zone, then the units granted.
TEST(DecodeLeaseReply, GrantedAfterTheZone)
{
    ReplyPtr r = must_parse(array_of({integer(0), integer(97),
                                      integer(1700000000), integer(1),
                                      integer(37)}));
    ZoneCount count{};
    std::uint64_t granted = 99;

    ScriptReply out = decode_lease_reply(r->element, &count, &granted);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    EXPECT_FALSE(out.rejected);
    expect_count(count, {97, 1700000000, true}, 0);
    EXPECT_EQ(granted, 37u);

    r = must_parse(array_of({integer(1), integer(100), integer(1700000000),
                             integer(1), integer(0)}));
    out = decode_lease_reply(r->element, &count, &granted);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    EXPECT_TRUE(out.rejected);
    EXPECT_EQ(granted, 0u);

    ReplyPtr error = must_parse(array_of({"-ERR ratelimit: lease of a "
                                          "dry-run zone\r\n", integer(0),
                                          integer(0), integer(0),
                                          integer(0)}));
    out = decode_lease_reply(error->element, &count, &granted);
    EXPECT_EQ(out.kind, Kind::kError);
    EXPECT_EQ(out.error, "ERR ratelimit: lease of a dry-run zone");
}

// A lease's override, from the batch's tail: the renewal's ledger sizes
// its asks by it (leases/lease_ledger.hpp).  Past the zone's one, none.
TEST(DecodeLeaseReply, TheOverrideOfItsTail)
{
    ReplyPtr r = must_parse(batch_of(1700000000123, {
        verdict(false, {{3, 1700000000, false}}),
        {integer(0), integer(97), integer(1700000000), integer(0),
         integer(37)},
    }, {{2, 1, 40000, 60000, 2500}}));
    BatchReply batch = decode_batch_reply(r.get(), 10, 2, true);
    ASSERT_EQ(batch.kind, BatchKind::kReplies);

    std::size_t next = 0;
    ZoneCount count{};
    std::uint64_t granted = 0;
    told_of(batch.told, 0, &next);
    ScriptReply out = decode_lease_reply(r->element + 5, &count, &granted,
                                         told_of(batch.told, 1, &next));
    ASSERT_EQ(out.kind, Kind::kVerdict);
    EXPECT_EQ(granted, 37u);
    EXPECT_TRUE(count.override.set);
    EXPECT_EQ(count.override.limit, 40000u);
    EXPECT_EQ(count.override.window_ms, 60000u);
    EXPECT_EQ(count.override.left_ms, 2500u);

    r = must_parse(batch_of(1700000000123, {
        {integer(0), integer(97), integer(1700000000), integer(0),
         integer(37)},
    }, {{1, 2, 40000, 60000, 0}}));
    batch = decode_batch_reply(r.get(), 6, 1, true);
    ASSERT_EQ(batch.kind, BatchKind::kReplies);
    next = 0;
    EXPECT_EQ(decode_lease_reply(r->element + 1, &count, &granted,
                                 told_of(batch.told, 0, &next)).kind,
              Kind::kMalformed);
}

// Refused yet granted, or a grant that is no count: malformed.
TEST(DecodeLeaseReply, BadGrantIsMalformed)
{
    ZoneCount count{};
    std::uint64_t granted;
    ReplyPtr both = must_parse(array_of({integer(1), integer(100),
                                         integer(1700000000), integer(1),
                                         integer(3)}));
    EXPECT_EQ(decode_lease_reply(both->element, &count, &granted).kind,
              Kind::kMalformed);

    for (const char *bad : kBadElements) {
        ReplyPtr r = must_parse(array_of({integer(0), integer(100),
                                          integer(1700000000), integer(0),
                                          bad}));
        EXPECT_EQ(decode_lease_reply(r->element, &count, &granted).kind,
                  Kind::kMalformed) << bad;
    }
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

    ScriptReply out = decode_script_reply(r->element + 1, 2, counts);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    EXPECT_TRUE(out.rejected);
    expect_count(counts[0], {10, 1699999941, true}, 0);
    expect_count(counts[1], {0, 0, false}, 1);
    // Not one of the `zones` entries: left alone.
    expect_count(counts[2], {42, 43, true}, 2);
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

    ScriptReply out = decode_script_reply(r->element + 1, 2, counts);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    EXPECT_FALSE(out.rejected);
    expect_count(counts[0], {4, 2, false}, 0);
    expect_count(counts[1], {9, 3, true}, 1);
}

// An interval peek's reply: the peek's, then one count per zone.
TEST(DecodeScriptReply, IntervalCountsAfterTheZones)
{
    ReplyPtr r = must_parse(array_of({
        integer(5000), integer(0),
        integer(31), integer(1699999991), integer(0),
        integer(2), integer(3), integer(0),
        integer(7), integer(2),
    }));
    ASSERT_NE(r, nullptr);
    ZoneCount counts[2] = {};

    ScriptReply out = decode_script_reply(r->element + 1, 2, counts, true);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    expect_count(counts[0], {31, 1699999991, false}, 0);
    expect_count(counts[1], {2, 3, false}, 1);
    EXPECT_EQ(counts[0].in_interval, 7u);
    EXPECT_EQ(counts[1].in_interval, 2u);

    // Without `interval`, the counts after the zones are not read.
    counts[0].in_interval = 99;
    out = decode_script_reply(r->element + 1, 2, counts);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    EXPECT_EQ(counts[0].in_interval, 0u);
}

TEST(DecodeScriptReply, BadIntervalCountIsMalformed)
{
    for (const char *bad : kBadElements) {
        SCOPED_TRACE(bad);
        ReplyPtr r = must_parse(array_of({
            integer(5000), integer(0),
            integer(4), integer(2), integer(0), bad,
        }));
        ASSERT_NE(r, nullptr);
        ZoneCount counts[1] = {};
        EXPECT_EQ(decode_script_reply(r->element + 1, 1, counts, true).kind,
                  Kind::kMalformed);
    }
}

TEST(DecodeScriptReply, LargestInteger)
{
    ReplyPtr r = must_parse(array_of({
        integer(1), integer(0),
        integer(INT64_MAX), integer(INT64_MAX), integer(0),
    }));
    ASSERT_NE(r, nullptr);
    ZoneCount counts[1] = {};

    ScriptReply out = decode_script_reply(r->element + 1, 1, counts);
    ASSERT_EQ(out.kind, Kind::kVerdict);
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

    ScriptReply out = decode_script_reply(r->element + 1, kMaxZonesPerRequest,
                                          counts);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    for (std::size_t i = 0; i < kMaxZonesPerRequest; i++) {
        expect_count(counts[i], {i + 1, 1000 + i, false}, i);
    }
}

// An error is the request's whole answer: the script pads after it with
// zeros, but the decoder does not rely on them.
TEST(DecodeScriptReply, OtherError)
{
    const char text[] = "ERR Error running script (call to f_0123): "
                        "@user_script:1: OOM command not allowed";

    for (const char *padding : {":0\r\n", "$-1\r\n", ":-1\r\n", "+x\r\n"}) {
        SCOPED_TRACE(padding);
        std::vector<std::string> items(1 + kRepliesPerZone, padding);
        items[0] = std::string("-") + text + "\r\n";
        ReplyPtr r = must_parse(batch_of(1, {items}));
        ASSERT_NE(r, nullptr);
        ZoneCount counts[1] = {};

        ScriptReply out = decode_script_reply(r->element + 1, 1, counts);
        EXPECT_EQ(out.kind, Kind::kError);
        EXPECT_EQ(out.error, text);
        EXPECT_EQ(out.error.data(), r->element[1].text.data());
    }
}

TEST(DecodeScriptReply, NoScriptIsJustAnError)
{
    ReplyPtr r = must_parse(batch_of(1, {failed("NOSCRIPT x", 1)}));
    ASSERT_NE(r, nullptr);
    ZoneCount counts[1] = {};
    EXPECT_EQ(decode_script_reply(r->element + 1, 1, counts).kind,
              Kind::kError);
}

// A request's reply does not say where it ends (the batch's length is
// checked once for all): the decoder reads its 1 + kRepliesPerZone * zones
// elements, every one of them and no more.
TEST(DecodeScriptReply, ReadsItsElementsOnly)
{
    ZoneCount counts[4] = {};

    for (std::size_t zones = 0; zones < std::size(counts); zones++) {
        SCOPED_TRACE(zones);
        std::vector<std::string> items =
            verdict(false, std::vector<ZoneCount>(zones, {1, 2, false}));
        // A zone's worth of elements that no zone could be decoded from.
        items.insert(items.end(), kRepliesPerZone, "$-1\r\n");
        ReplyPtr r = must_parse(batch_of(1, {items}));
        ASSERT_NE(r, nullptr);

        EXPECT_EQ(decode_script_reply(r->element + 1, zones, counts).kind,
                  Kind::kVerdict);
        EXPECT_EQ(decode_script_reply(r->element + 1, zones + 1, counts).kind,
                  Kind::kMalformed);
    }
}

TEST(DecodeScriptReply, ZeroZones)
{
    ReplyPtr r = must_parse("*2\r\n:77\r\n:1\r\n");
    ASSERT_NE(r, nullptr);

    ScriptReply out = decode_script_reply(r->element + 1, 0, nullptr);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    EXPECT_TRUE(out.rejected);
}

// The elements of a good two-zone request.
constexpr std::size_t kTwoZoneElements = 1 + 2 * kRepliesPerZone;

// A batch of a good two-zone request, its element `at` replaced by `bad`.
std::string with_element(std::size_t at, const std::string &bad)
{
    std::vector<std::string> items =
        verdict(false, {{3, 1700000000, false}, {1, 1700000000, false}});
    items[at] = bad;
    return batch_of(1700000000123, {items});
}

TEST(DecodeScriptReply, BadElementAnywhereIsMalformed)
{
    for (std::size_t at = 0; at < kTwoZoneElements; at++) {
        for (const char *bad : kBadElements) {
            SCOPED_TRACE("element " + std::to_string(at) + ": " + bad);
            ReplyPtr r = must_parse(with_element(at, bad));
            ASSERT_NE(r, nullptr);
            ZoneCount counts[2] = {};
            // An error first is how the script says it failed the request.
            Kind want = at == 0 && bad[0] == '-' ? Kind::kError
                                                 : Kind::kMalformed;
            EXPECT_EQ(decode_script_reply(r->element + 1, 2, counts).kind,
                      want);
        }
    }
}

TEST(DecodeScriptReply, FlagsAboveOneAreMalformed)
{
    // Element 0 is the rejected flag, 3 and 6 the zones' over flags.
    const long long kFlags[] = {2, 3, 255, INT64_MAX};
    for (std::size_t at : {0, 3, 6}) {
        for (long long v : kFlags) {
            SCOPED_TRACE(std::to_string(at) + " = " + std::to_string(v));
            ReplyPtr r = must_parse(with_element(at, integer(v)));
            ASSERT_NE(r, nullptr);
            ZoneCount counts[2] = {};
            EXPECT_EQ(decode_script_reply(r->element + 1, 2, counts).kind,
                      Kind::kMalformed);
        }
    }

    for (std::size_t at : {0, 3, 6}) {
        ReplyPtr r = must_parse(with_element(at, integer(1)));
        ASSERT_NE(r, nullptr);
        ZoneCount counts[2] = {};
        ScriptReply out = decode_script_reply(r->element + 1, 2, counts);
        EXPECT_EQ(out.kind, Kind::kVerdict) << at;
        EXPECT_EQ(out.rejected, at == 0);
        EXPECT_EQ(counts[0].over, at == 3);
        EXPECT_EQ(counts[1].over, at == 6);
    }
}

TEST(DecodeBatchReply, TimeIsTheFirstElement)
{
    const long long kTimes[] = {0, 1, 1700000000123, INT64_MAX};
    for (long long now : kTimes) {
        SCOPED_TRACE(now);
        ReplyPtr r =
            must_parse(batch_of(now, {verdict(true, {{1, 2, true}})}));
        ASSERT_NE(r, nullptr);

        BatchReply out = decode_batch_reply(r.get(), 5, 1, false);
        ASSERT_EQ(out.kind, BatchKind::kReplies);
        EXPECT_EQ(out.now_ms, static_cast<std::uint64_t>(now));
    }
}

// A request the script failed on spoils no other: its neighbours, of other
// zone counts, decode at their offsets.
TEST(DecodeBatchReply, FailedRequestBetweenOthers)
{
    const char text[] = "WRONGTYPE Operation against a key holding the "
                        "wrong kind of value";
    ReplyPtr r = must_parse(batch_of(1700000000123, {
        verdict(false, {{3, 1700000000, false}}),
        failed(text, 2),
        verdict(true, {{5, 1699999999, true}, {8, 1699999990, false}}),
    }));
    ASSERT_NE(r, nullptr);

    // Offsets 1, 1 + 4 and 5 + 7; the last request ends the 19 elements.
    BatchReply batch = decode_batch_reply(r.get(), 19, 3, false);
    ASSERT_EQ(batch.kind, BatchKind::kReplies);
    EXPECT_EQ(batch.now_ms, 1700000000123u);

    ZoneCount counts[2] = {};
    ScriptReply out = decode_script_reply(r->element + 1, 1, counts);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    EXPECT_FALSE(out.rejected);
    expect_count(counts[0], {3, 1700000000, false}, 0);

    out = decode_script_reply(r->element + 5, 2, counts);
    ASSERT_EQ(out.kind, Kind::kError);
    EXPECT_EQ(out.error, text);

    out = decode_script_reply(r->element + 12, 2, counts);
    ASSERT_EQ(out.kind, Kind::kVerdict);
    EXPECT_TRUE(out.rejected);
    expect_count(counts[0], {5, 1699999999, true}, 0);
    expect_count(counts[1], {8, 1699999990, false}, 1);
}

TEST(DecodeBatchReply, WrongShapeIsMalformed)
{
    EXPECT_EQ(decode_batch_reply(nullptr, 1, 1, false).kind,
              BatchKind::kMalformed);

    // Not an array, not `elements` long, or nothing to hold the time.
    const std::pair<const char *, std::size_t> kShapes[] = {
        {":5\r\n", 1}, {"+OK\r\n", 1}, {"$-1\r\n", 1}, {"*-1\r\n", 1},
        {"$5\r\nhello\r\n", 1}, {"*0\r\n", 1}, {"*0\r\n", 0},
        {"*2\r\n:1\r\n:2\r\n", 1}, {kOneZone, 0}, {kOneZone, 4},
        {kOneZone, 6},
    };
    for (const auto &[resp, elements] : kShapes) {
        SCOPED_TRACE(testing::PrintToString(resp) + " of "
                     + std::to_string(elements));
        ReplyPtr r = must_parse(resp);
        ASSERT_NE(r, nullptr);
        EXPECT_EQ(decode_batch_reply(r.get(), elements, 1, false).kind,
                  BatchKind::kMalformed);
    }

    // The right length, but no time first.
    for (const char *bad : kBadElements) {
        SCOPED_TRACE(bad);
        ReplyPtr r = must_parse(array_of({bad, integer(0), integer(3),
                                          integer(1700000000), integer(0)}));
        ASSERT_NE(r, nullptr);
        EXPECT_EQ(decode_batch_reply(r.get(), 5, 1, false).kind,
                  BatchKind::kMalformed);
    }
}

TEST(DecodeBatchReply, NoScript)
{
    const char text[] = "NOSCRIPT No matching script. Please use EVAL.";
    ReplyPtr r = must_parse(std::string("-") + text + "\r\n");
    ASSERT_NE(r, nullptr);

    BatchReply out = decode_batch_reply(r.get(), 4, 1, false);
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

        BatchReply out = decode_batch_reply(r.get(), 1, 1, false);
        EXPECT_EQ(out.kind, BatchKind::kError);
        EXPECT_EQ(out.error, text);
    }
}

// The tail's overrides reach the requests they name, and only those: a
// request with none, between two with some, has none, though its counts'
// override was set before.
TEST(DecodeBatchReply, OverridesReachTheirRequests)
{
    ReplyPtr r = must_parse(batch_of(1700000000123, {
        verdict(false, {{3, 1700000000, false}, {1, 1700000000, false}}),
        verdict(false, {{2, 1700000000, false}}),
        verdict(true, {{9, 1700000000, true}}),
    }, {{1, 2, 1000, 60000, 0}, {3, 1, 0, 60000, 4500}}));
    ASSERT_NE(r, nullptr);

    BatchReply batch = decode_batch_reply(r.get(), 16, 3, true);
    ASSERT_EQ(batch.kind, BatchKind::kReplies);
    ASSERT_EQ(batch.told.items, 2u);

    std::size_t next = 0;
    ZoneCount counts[2] = {};
    const std::size_t kZones[] = {2, 1, 1};
    const std::size_t kAt[] = {1, 8, 12};
    std::vector<std::vector<Override>> got;
    for (std::size_t i = 0; i < 3; i++) {
        counts[0].override = counts[1].override = {true, 7, 7, 7};
        Told told = told_of(batch.told, i, &next);
        ASSERT_EQ(decode_script_reply(r->element + kAt[i], kZones[i],
                                      counts, false, told).kind,
                  Kind::kVerdict);
        got.push_back({counts[0].override, counts[1].override});
    }
    EXPECT_FALSE(got[0][0].set);
    EXPECT_TRUE(got[0][1].set);
    EXPECT_EQ(got[0][1].limit, 1000u);
    EXPECT_EQ(got[0][1].window_ms, 60000u);
    EXPECT_EQ(got[0][1].left_ms, 0u);
    EXPECT_FALSE(got[1][0].set);
    EXPECT_TRUE(got[2][0].set);
    EXPECT_EQ(got[2][0].limit, 0u);
    EXPECT_EQ(got[2][0].left_ms, 4500u);
    EXPECT_EQ(next, 2u);
}

// The tail's ban items (window kToldBanWindow) reach their zones beside
// an override: a ban set by the entry (its length D), one in force before
// (0), and none, though the counts held one before.
TEST(DecodeBatchReply, BansReachTheirZones)
{
    ReplyPtr r = must_parse(batch_of(1700000000123, {
        verdict(true, {{5, 1700000000, true}, {1, 1700000000, false}}),
        verdict(true, {{0, 0, true}}),
        verdict(false, {{2, 1700000000, false}}),
    }, {{1, 1, 3600000, 0, 3600000}, {2, 1, 1000, 60000, 0},
        {2, 1, 0, 0, 1234}}));
    ASSERT_NE(r, nullptr);

    BatchReply batch = decode_batch_reply(r.get(), 16, 3, true);
    ASSERT_EQ(batch.kind, BatchKind::kReplies);
    ASSERT_EQ(batch.told.items, 3u);

    std::size_t next = 0;
    ZoneCount counts[2] = {};
    const std::size_t kZones[] = {2, 1, 1};
    const std::size_t kAt[] = {1, 8, 12};
    std::vector<std::vector<ZoneCount>> got;
    for (std::size_t i = 0; i < 3; i++) {
        counts[0].ban_left_ms = counts[1].ban_left_ms = 7;
        counts[0].ban_set_ms = counts[1].ban_set_ms = 7;
        Told told = told_of(batch.told, i, &next);
        ASSERT_EQ(decode_script_reply(r->element + kAt[i], kZones[i],
                                      counts, false, told).kind,
                  Kind::kVerdict);
        got.push_back({counts[0], counts[1]});
    }
    EXPECT_EQ(got[0][0].ban_set_ms, 3600000u);
    EXPECT_EQ(got[0][0].ban_left_ms, 3600000u);
    EXPECT_FALSE(got[0][0].override.set);
    EXPECT_EQ(got[0][1].ban_left_ms, 0u);
    EXPECT_EQ(got[0][1].ban_set_ms, 0u);
    EXPECT_EQ(got[1][0].ban_set_ms, 0u);
    EXPECT_EQ(got[1][0].ban_left_ms, 1234u);
    EXPECT_TRUE(got[1][0].override.set);
    EXPECT_EQ(got[1][0].override.limit, 1000u);
    EXPECT_EQ(got[2][0].ban_left_ms, 0u);
    EXPECT_EQ(got[2][0].ban_set_ms, 0u);

    // A ban with no time left, or longer than any window, is not one.
    for (const std::vector<long long> &ban :
         {std::vector<long long>{1, 1, 0, 0, 0},
          std::vector<long long>{1, 1, 604800000000001, 0, 5}})
    {
        r = must_parse(batch_of(1700000000123,
                                {verdict(true, {{1, 1700000000, true}})},
                                {ban}));
        ASSERT_NE(r, nullptr);
        EXPECT_EQ(decode_batch_reply(r.get(), 5, 1, true).kind,
                  BatchKind::kMalformed);
    }
}

// A tail that is not the script's spoils the whole batch: an override of
// no request, out of order, of zone 0 or past the most a request has, a
// limit past 2^53, a window of 0, a negative or not a number, or a tail
// cut short.
TEST(DecodeBatchReply, MalformedTail)
{
    const std::vector<std::vector<long long>> kTails[] = {
        {{0, 1, 5, 1000, 0}},
        {{3, 1, 5, 1000, 0}},
        {{2, 1, 5, 1000, 0}, {1, 1, 5, 1000, 0}},
        {{1, 0, 5, 1000, 0}},
        {{1, 17, 5, 1000, 0}},
        {{1, 1, (1LL << 53) + 1, 1000, 0}},
        {{1, 1, 5, 0, 0}},
        {{1, 1, 5, 1000, -1}},
        {{1, 1, -5, 1000, 0}},
        {{1, 1, 5, 1000}},
    };
    for (const auto &tail : kTails) {
        SCOPED_TRACE(testing::PrintToString(tail));
        ReplyPtr r = must_parse(batch_of(1700000000123, {
            verdict(false, {{1, 1700000000, false}}),
            verdict(false, {{1, 1700000000, false}}),
        }, tail));
        ASSERT_NE(r, nullptr);
        EXPECT_EQ(decode_batch_reply(r.get(), 9, 2, true).kind,
                  BatchKind::kMalformed);
    }

    ReplyPtr r = must_parse(array_of({integer(1), integer(0), integer(1),
                                      integer(1), integer(0), "$1\r\nx\r\n",
                                      integer(1), integer(5), integer(1000),
                                      integer(0)}));
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(decode_batch_reply(r.get(), 5, 1, true).kind,
              BatchKind::kMalformed);

    // A tail of the right shape after the replies of a batch with no side
    // zone: a reply too long, not overrides (t/24's "long1").
    r = must_parse(batch_of(1700000000123,
                            {verdict(false, {{1, 1700000000, false}})},
                            {{1, 1, 1, 1, 1}}));
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(decode_batch_reply(r.get(), 5, 1, false).kind,
              BatchKind::kMalformed);
    EXPECT_EQ(decode_batch_reply(r.get(), 5, 1, true).kind,
              BatchKind::kReplies);

    // Well formed, but of a zone past the request's.
    r = must_parse(batch_of(1700000000123,
                            {verdict(false, {{1, 1700000000, false}})},
                            {{1, 2, 5, 1000, 0}}));
    ASSERT_NE(r, nullptr);
    BatchReply batch = decode_batch_reply(r.get(), 5, 1, true);
    ASSERT_EQ(batch.kind, BatchKind::kReplies);
    std::size_t next = 0;
    ZoneCount count;
    EXPECT_EQ(decode_script_reply(r->element + 1, 1, &count, false,
                                  told_of(batch.told, 0, &next)).kind,
              Kind::kMalformed);
}

// What the decoders must answer, worked out from the header alone.
bool good_count(const Reply &e, std::uint64_t max, std::uint64_t *out)
{
    if (e.type != Reply::Type::kInteger || e.integer < 0
        || static_cast<std::uint64_t>(e.integer) > max)
    {
        return false;
    }
    *out = static_cast<std::uint64_t>(e.integer);
    return true;
}

constexpr std::uint64_t kAny = UINT64_MAX;

struct ExpectedBatch {
    BatchKind kind;
    std::uint64_t now_ms = 0;
};

// Whether the tail of overrides after `elements` tells of `entries`
// requests as window_script.hpp says it does.
bool good_tail(const Reply *r, std::size_t elements, std::size_t entries)
{
    std::size_t items = (r->elements - elements) / kOverrideReplies;
    std::uint64_t last = 1;

    for (std::size_t i = 0; i < items; i++) {
        const Reply *o = r->element + elements + kOverrideReplies * i;
        std::uint64_t entry, zone, limit, window, left;
        if (!good_count(o[0], entries, &entry) || entry < last
            || !good_count(o[1], kMaxZonesPerRequest, &zone) || zone == 0
            || !good_count(o[2], std::uint64_t{1} << 53, &limit)
            || !good_count(o[3], kAny, &window) || window == 0
            || !good_count(o[4], kAny, &left))
        {
            return false;
        }
        last = entry;
    }
    return true;
}

ExpectedBatch expected_batch(const Reply *r, std::size_t elements,
                             std::size_t entries, bool sided)
{
    if (r->type == Reply::Type::kError) {
        return {r->text.substr(0, 8) == "NOSCRIPT" ? BatchKind::kNoScript
                                                   : BatchKind::kError};
    }

    ExpectedBatch e{BatchKind::kReplies};
    if (r->type != Reply::Type::kArray || r->elements < elements
        || (r->elements - elements) % kOverrideReplies != 0
        || (r->elements > elements && !sided)
        || elements == 0 || !good_count(r->element[0], kAny, &e.now_ms)
        || !good_tail(r, elements, entries))
    {
        return {BatchKind::kMalformed};
    }
    return e;
}

struct Expected {
    explicit Expected(Kind k) : kind(k) {}

    Kind kind;
    bool rejected = false;
    std::vector<ZoneCount> counts;
};

Expected expected_for(const Reply *reply, std::size_t zones)
{
    if (reply[0].type == Reply::Type::kError) {
        return Expected(Kind::kError);
    }

    Expected malformed(Kind::kMalformed);
    Expected e(Kind::kVerdict);
    std::uint64_t rejected;
    if (!good_count(reply[0], 1, &rejected)) {
        return malformed;
    }
    e.rejected = rejected == 1;

    for (std::size_t i = 0; i < zones; i++) {
        const Reply *z = reply + 1 + 3 * i;
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

// A batch's requests and where each one's reply starts in the flat reply,
// worked out here afresh rather than taken from ScriptBatch.
struct Layout {
    std::vector<std::size_t> zones;
    std::vector<std::size_t> offsets;
    std::size_t elements = 1;  // the time
};

Layout random_layout(std::mt19937 &rng)
{
    std::uniform_int_distribution<std::size_t> requests(1, 4), zones(0, 4);
    Layout l;
    for (std::size_t n = requests(rng); n > 0; n--) {
        l.zones.push_back(zones(rng));
        l.offsets.push_back(l.elements);
        l.elements += 1 + kRepliesPerZone * l.zones.back();
    }
    return l;
}

// A reply to a batch of `layout`: mostly what the script answers, now and
// then a request it failed on, a flag above one or an element no script
// sends.
std::string random_batch_reply(std::mt19937 &rng, const Layout &layout)
{
    auto pick = [&](long long lo, long long hi) {
        return std::uniform_int_distribution<long long>(lo, hi)(rng);
    };
    auto flag = [&]() { return integer(pick(0, 30) == 0 ? 2 : pick(0, 1)); };
    std::vector<std::string> items = {integer(pick(0, 1LL << 45))};

    for (std::size_t zones : layout.zones) {
        if (pick(0, 9) == 0) {
            std::vector<std::string> error = failed("ERR x", zones);
            items.insert(items.end(), error.begin(), error.end());
            continue;
        }
        items.push_back(flag());
        for (std::size_t i = 0; i < zones; i++) {
            items.push_back(integer(pick(0, 100000)));
            items.push_back(integer(pick(0, 1LL << 40)));
            items.push_back(flag());
        }
    }
    for (std::string &item : items) {
        if (pick(0, 60) == 0) {
            item = kBadElements[pick(0, std::size(kBadElements) - 1)];
        }
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
            // Half the time first, where the reader reads it as the whole
            // reply: the batch's own shape and errors get tried too.
            std::string piece = kPieces[below(std::size(kPieces))];
            s.insert(below(2) == 0 ? 0 : below(s.size() + 1), piece);
            break;
        }
        default: {
            // Make the element count a nearby one: a reply a little short
            // or long.
            std::size_t end = s.find('\r');
            if (s.size() > 1 && s[0] == '*' && end != std::string::npos) {
                std::size_t count = std::strtoul(s.c_str() + 1, nullptr, 10);
                s.replace(1, end - 1, std::to_string(count + below(5) - 2));
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

struct Tally {
    int verdicts = 0;
    int errors = 0;
    int malformed = 0;
};

// Decodes the request whose reply starts at `reply` and checks it against
// expected_for().
void check_request(const Reply *reply, std::size_t zones,
                   Tally *tally)
{
    ZoneCount counts[kMaxZonesPerRequest + 1];
    for (ZoneCount &c : counts) {
        c = {0xdead, 0xbeef, true};
    }
    ScriptReply out = decode_script_reply(reply, zones, counts);
    Expected want = expected_for(reply, zones);

    ASSERT_EQ(out.kind, want.kind);
    switch (out.kind) {
    case Kind::kVerdict:
        tally->verdicts++;
        EXPECT_EQ(out.rejected, want.rejected);
        for (std::size_t i = 0; i < zones; i++) {
            expect_count(counts[i], want.counts[i], i);
        }
        break;
    case Kind::kError:
        tally->errors++;
        EXPECT_EQ(out.error.data(), reply[0].text.data());
        EXPECT_EQ(out.error.size(), reply[0].text.size());
        break;
    case Kind::kMalformed:
        tally->malformed++;
        break;
    }
    for (std::size_t i = zones; i <= kMaxZonesPerRequest; i++) {
        EXPECT_EQ(counts[i].total, 0xdeadu) << "wrote entry " << i;
    }
}

// Whole batches, as the module decodes them: every request at its offset,
// but only once the batch's shape has been accepted.
TEST(DecodeBatchReply, Fuzz)
{
    std::mt19937 rng(20240611);
    int parsed = 0;
    std::map<BatchKind, int> batches;
    Tally requests;

    for (int iter = 0; iter < 20000; iter++) {
        Layout layout = random_layout(rng);
        std::string resp;
        switch (iter % 4) {
        case 0:
            resp = random_batch_reply(rng, layout);
            break;
        case 3:
            resp = random_bytes(rng);
            break;
        default:
            resp = mutate(rng, random_batch_reply(rng, layout));
            break;
        }
        ReplyPtr r = parse(resp);
        if (r == nullptr) {
            continue;
        }
        parsed++;

        SCOPED_TRACE(testing::PrintToString(resp) + " of "
                     + std::to_string(layout.elements));
        bool sided = iter % 8 < 4;
        BatchReply out = decode_batch_reply(r.get(), layout.elements,
                                            layout.zones.size(), sided);
        ExpectedBatch want = expected_batch(r.get(), layout.elements,
                                            layout.zones.size(), sided);
        ASSERT_EQ(out.kind, want.kind);
        batches[out.kind]++;

        if (out.kind == BatchKind::kReplies) {
            EXPECT_EQ(out.now_ms, want.now_ms);
            for (std::size_t i = 0; i < layout.zones.size(); i++) {
                SCOPED_TRACE("request " + std::to_string(i));
                ASSERT_NO_FATAL_FAILURE(check_request(
                    r->element + layout.offsets[i], layout.zones[i],
                    &requests));
            }
        } else if (out.kind != BatchKind::kMalformed) {
            EXPECT_EQ(out.error, r->text);
        }
    }

    // The generator must reach every branch for the test to mean much.
    EXPECT_GT(parsed, 6000);
    EXPECT_GT(batches[BatchKind::kReplies], 4000);
    EXPECT_GT(batches[BatchKind::kNoScript], 100);
    EXPECT_GT(batches[BatchKind::kError], 100);
    EXPECT_GT(batches[BatchKind::kMalformed], 1500);
    EXPECT_GT(requests.verdicts, 7000);
    EXPECT_GT(requests.errors, 800);
    EXPECT_GT(requests.malformed, 1500);
}

}  // namespace
}  // namespace ratelimit
