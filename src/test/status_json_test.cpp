#include "report/status_json.hpp"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "limits/algorithms.hpp"
#include "limits/rate_headers.hpp"

namespace ratelimit {
namespace {

std::string json_string(std::string_view bytes)
{
    std::string out(6 * bytes.size(), '\0');
    out.resize(write_json_string(bytes, out.data()));
    return out;
}

std::string status_json(const ZoneReport *reports, std::size_t n)
{
    std::string out(status_json_max_size(reports, n), '\0');
    out.resize(write_status_json(reports, n, out.data()));
    return out;
}

// Length of the valid UTF-8 sequence at s[i] (RFC 3629), 0 if invalid.
std::size_t utf8_at(const std::string &s, std::size_t i)
{
    auto b = [&](std::size_t k) {
        return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u;
    };
    auto cont = [&](std::size_t k) { return (b(k) & 0xc0) == 0x80; };
    unsigned c = b(i);

    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) return cont(i + 1) ? 2 : 0;
    if (c == 0xe0) return b(i + 1) >= 0xa0 && cont(i + 1) && cont(i + 2) ? 3 : 0;
    if (c == 0xed) return b(i + 1) < 0xa0 && cont(i + 1) && cont(i + 2) ? 3 : 0;
    if (c >= 0xe1 && c <= 0xef) return cont(i + 1) && cont(i + 2) ? 3 : 0;
    if (c == 0xf0) return b(i + 1) >= 0x90 && cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
    if (c >= 0xf1 && c <= 0xf3) return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
    if (c == 0xf4) return b(i + 1) < 0x90 && cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
    return 0;
}

// Checks that `text` is valid content of a JSON string (RFC 8259) in valid
// UTF-8, and decodes it; \u00XX escapes decode to the byte XX, which is how
// the writer represents bytes that are not UTF-8.
bool decode_json_string(const std::string &text, std::string *bytes)
{
    bytes->clear();

    for (std::size_t i = 0; i < text.size();) {
        unsigned char c = static_cast<unsigned char>(text[i]);

        if (c == '"' || c < 0x20) {
            return false;
        }

        if (c == '\\') {
            if (i + 1 >= text.size()) {
                return false;
            }
            char e = text[i + 1];
            if (e == '"' || e == '\\') {
                bytes->push_back(e);
                i += 2;
                continue;
            }
            if (e != 'u' || i + 6 > text.size()
                || text.compare(i + 2, 2, "00") != 0)
            {
                return false;
            }
            bytes->push_back(static_cast<char>(
                std::stoi(text.substr(i + 4, 2), nullptr, 16)));
            i += 6;
            continue;
        }

        std::size_t len = utf8_at(text, i);
        if (len == 0) {
            return false;
        }
        bytes->append(text, i, len);
        i += len;
    }

    return true;
}

TEST(JsonString, KeepsPrintableAsciiAndValidUtf8)
{
    EXPECT_EQ(json_string("abc 1.2.3.4"), "abc 1.2.3.4");
    EXPECT_EQ(json_string("caf\xc3\xa9"), "caf\xc3\xa9");
    EXPECT_EQ(json_string("\xe2\x82\xac"), "\xe2\x82\xac");
    EXPECT_EQ(json_string("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");
}

TEST(JsonString, EscapesQuotesBackslashesAndControls)
{
    EXPECT_EQ(json_string("a\"b\\c"), "a\\\"b\\\\c");
    EXPECT_EQ(json_string(std::string("\x00\n\x1f\x7f", 4)),
              "\\u0000\\u000a\\u001f\\u007f");
}

TEST(JsonString, EscapesBytesThatAreNotUtf8)
{
    EXPECT_EQ(json_string("\xff"), "\\u00ff");
    EXPECT_EQ(json_string("\x80"), "\\u0080");
    EXPECT_EQ(json_string("\xc3"), "\\u00c3");           // truncated
    EXPECT_EQ(json_string("\xc0\xaf"), "\\u00c0\\u00af"); // overlong
    EXPECT_EQ(json_string("\xe0\x80\xaf"), "\\u00e0\\u0080\\u00af");
    EXPECT_EQ(json_string("\xed\xa0\x80"), "\\u00ed\\u00a0\\u0080");  // surrogate
    EXPECT_EQ(json_string("\xf4\x90\x80\x80"),
              "\\u00f4\\u0090\\u0080\\u0080");           // past U+10FFFF
    EXPECT_EQ(json_string(std::string("\x7f\x00\x00\x01", 4)),
              "\\u007f\\u0000\\u0000\\u0001");
}

TEST(StatusJson, OneObjectPerZoneInOrder)
{
    ZoneReport reports[2] = {
        {"api", "k1", 10, 7, 3, 60, 1700000000, 0},
        {"login", "k1", 5, 5, 0, 3600, 1700000017, 17},
    };

    EXPECT_EQ(status_json(reports, 2),
              "[{\"zone\":\"api\",\"key\":\"k1\",\"limit\":10,\"used\":7,"
              "\"remaining\":3,\"window\":60,\"reset\":1700000000,"
              "\"retry_after\":0},"
              "{\"zone\":\"login\",\"key\":\"k1\",\"limit\":5,\"used\":5,"
              "\"remaining\":0,\"window\":3600,\"reset\":1700000017,"
              "\"retry_after\":17}]");
}

// A GCRA zone at 10r/s with burst=5, 580 ms of backlog: 6 turns used of
// 6, a request fits in 80 ms.
TEST(StatusJson, GcraZoneReportsTurns)
{
    Policy policy{10, 1000, 1000, Algorithm::kGcra, 5};
    ZoneCount count{580000, 0, true};
    ZoneReport report = report_zone("g", "k", policy, count, 1700000000000);

    EXPECT_EQ(status_json(&report, 1),
              "[{\"zone\":\"g\",\"key\":\"k\",\"type\":\"gcra\","
              "\"limit\":6,\"used\":6,\"remaining\":0,\"window\":1,"
              "\"reset\":1700000001,\"retry_after\":1,\"next_in\":0.080}]");

    count = {100000, 0, false};
    report = report_zone("g", "k", policy, count, 1700000000000);
    EXPECT_EQ(report.used, 1u);
    EXPECT_EQ(report.remaining, 5u);
    EXPECT_EQ(report.next_ms, 0u);
}

// A subject's override in force: its limit, the seconds until it lapses
// (-1: never) and, of a GCRA zone, its rate; the limit and remaining are
// the override's.
TEST(StatusJson, OverrideInForce)
{
    Policy window{100, 60000, 1000, Algorithm::kSliding, 0};
    ZoneCount count{7, 1699999999, false};
    count.override = {true, 250, 60000, 1500};
    ZoneReport report = report_zone("api", "k", overridden(window,
                                                           count.override),
                                    count, 1700000000000);
    EXPECT_EQ(status_json(&report, 1),
              "[{\"zone\":\"api\",\"key\":\"k\",\"limit\":250,\"used\":7,"
              "\"remaining\":243,\"window\":60,\"reset\":1700000059,"
              "\"retry_after\":0,\"override\":250,\"override_ttl\":2}]");

    Policy gcra{10, 1000, 1000, Algorithm::kGcra, 0};
    count = {0, 0, false};
    count.override = {true, 10, 60000, 0};
    report = report_zone("g", "k", overridden(gcra, count.override), count,
                         1700000000000);
    std::string json = status_json(&report, 1);
    EXPECT_NE(json.find(",\"override\":10,\"override_ttl\":-1,"
                        "\"override_rate\":\"10r/m\"}"),
              std::string::npos) << json;

    count.override = {true, 0, 60000, 30000};
    report = report_zone("g", "k", overridden(gcra, count.override), count,
                         1700000000000);
    EXPECT_EQ(report.limit, 0u);
    EXPECT_EQ(report.remaining, 0u);
    EXPECT_EQ(report.retry_after, 30u);
}

// A subject banned in the zone: nothing remaining, retry after and reset
// at the ban's end, whatever its count, and "banned_for" its seconds left
// rounded up.
TEST(StatusJson, BanInForce)
{
    Policy window{5, 900000, 900000, Algorithm::kFixed, 0};
    ZoneCount count{2, 1888, true};
    count.ban_left_ms = 3599001;
    ZoneReport report = report_zone("login", "k", window, count,
                                    1700000000000);
    EXPECT_EQ(status_json(&report, 1),
              "[{\"zone\":\"login\",\"key\":\"k\",\"limit\":5,\"used\":2,"
              "\"remaining\":0,\"window\":900,\"reset\":1700003600,"
              "\"retry_after\":3600,\"banned_for\":3600}]");
}

TEST(StatusJson, IntervalFieldsAfterRetryAfter)
{
    Policy ten{100, 10000, 1000};
    Policy fixed{5, 10000, 10000, Algorithm::kFixed};
    ZoneReport reports[2] = {
        {"ten", "k", 100, 31, 69, 10, 1700000001, 0},
        {"fix", "k", 5, 2, 3, 10, 1700000010, 0},
    };
    report_interval(&reports[0], ten, 2500, {31, 1699999991, false, 7});
    report_interval(&reports[1], fixed, 500, {2, 170000000, false, 2});

    EXPECT_EQ(reports[0].summed_ms, 3000u);
    EXPECT_EQ(reports[1].summed_ms, 10000u);

    EXPECT_EQ(status_json(reports, 2),
              "[{\"zone\":\"ten\",\"key\":\"k\",\"limit\":100,\"used\":31,"
              "\"remaining\":69,\"window\":10,\"reset\":1700000001,"
              "\"retry_after\":0,\"interval\":2.500,"
              "\"interval_summed\":3.000,\"count_in_interval\":7},"
              "{\"zone\":\"fix\",\"key\":\"k\",\"limit\":5,\"used\":2,"
              "\"remaining\":3,\"window\":10,\"reset\":1700000010,"
              "\"retry_after\":0,\"interval\":0.500,"
              "\"interval_summed\":10.000,\"count_in_interval\":2,"
              "\"interval_note\":\"fixed window: the count of its current "
              "window\"}]");
}

TEST(StatusJson, ConcurrencyZonesSayTheirTypeBesideRateZones)
{
    ConcurrencyPolicy uploads{2, 20, 30000, 10000};
    ZoneReport reports[2] = {
        {"api", "k1", 10, 7, 3, 60, 1700000000, 0},
        report_permit_zone("uploads", "k\"1", uploads, 2, 5),
    };

    EXPECT_EQ(status_json(reports, 2),
              "[{\"zone\":\"api\",\"key\":\"k1\",\"limit\":10,\"used\":7,"
              "\"remaining\":3,\"window\":60,\"reset\":1700000000,"
              "\"retry_after\":0},"
              "{\"zone\":\"uploads\",\"key\":\"k\\\"1\","
              "\"type\":\"concurrency\",\"limit\":2,\"in_flight\":2,"
              "\"queued\":5,\"queue_limit\":20}]");
}

TEST(StatusJson, ConcurrencyZoneTakesNoInterval)
{
    ConcurrencyPolicy one{1, 0, 10000, 10000};
    Policy ten{100, 10000, 1000};
    ZoneReport report = report_permit_zone("one", "k", one, 0, 0);
    report_interval(&report, ten, 2500, {0, 0, false, 0});

    EXPECT_EQ(status_json(&report, 1),
              "[{\"zone\":\"one\",\"key\":\"k\",\"type\":\"concurrency\","
              "\"limit\":1,\"in_flight\":0,\"queued\":0,"
              "\"queue_limit\":0}]");
}

TEST(StatusJson, NoZonesIsAnEmptyArray)
{
    EXPECT_EQ(status_json(nullptr, 0), "[]");
}

TEST(ReportZone, UsedRemainingResetAndRetry)
{
    Policy policy{10, 60000, 1000};
    std::uint64_t now = 1700000000500;  // bucket 1700000000

    ZoneReport open = report_zone("api", "k", policy,
                                  {7, 1699999990, false}, now);
    EXPECT_EQ(open.used, 7u);
    EXPECT_EQ(open.remaining, 3u);
    EXPECT_EQ(open.window_s, 60u);
    // Bucket 1699999990 leaves at (1699999990 + 60) * 1000 ms.
    EXPECT_EQ(open.reset, 1700000050u);
    EXPECT_EQ(open.retry_after, 0u);

    ZoneReport full = report_zone("api", "k", policy,
                                  {10, 1699999990, true}, now);
    EXPECT_EQ(full.remaining, 0u);
    EXPECT_EQ(full.retry_after, 50u);  // 49.5 s, rounded up

    ZoneReport unknown = report_zone("api", "k", policy, {0, 0, false}, now);
    EXPECT_EQ(unknown.used, 0u);
    EXPECT_EQ(unknown.remaining, 10u);
    EXPECT_EQ(unknown.reset, 1700000001u);
    EXPECT_EQ(unknown.retry_after, 0u);
}

// A GCRA zone has no buckets to sum: its row answers no ?interval=.
TEST(StatusJson, GcraZoneTakesNoInterval)
{
    Policy policy{10, 1000, 1000, Algorithm::kGcra, 5};
    ZoneReport report = report_zone("g", "k", policy, {0, 0, false},
                                    1700000000000);
    report_interval(&report, policy, 500, {0, 0, false, 3});

    EXPECT_EQ(report.interval_ms, 0u);
    EXPECT_EQ(status_json(&report, 1),
              "[{\"zone\":\"g\",\"key\":\"k\",\"type\":\"gcra\","
              "\"limit\":6,\"used\":0,\"remaining\":6,\"window\":1,"
              "\"reset\":1700000000,\"retry_after\":0,\"next_in\":0.000}]");
}

// A calendar zone's object names the period Redis counted in, in its time
// zone, after retry_after; its window is that period's, reset its end.
TEST(StatusJson, CalendarZoneNamesItsPeriod)
{
    // November 2026 in Berlin, and December's end beside it.
    Policy month{1000, 2592000000, 2592000000, Algorithm::kCalendar, 0,
                 {1793487600000, 1796079600000, 1798758000000}};
    ZoneReport report = report_zone("plan", "k", month,
                                    {7, 1796079599999, false},
                                    1795000000000);
    report.period_start = "2026-11-01T00:00:00+01:00";
    report.period_end = "2026-12-01T00:00:00+01:00";

    EXPECT_EQ(status_json(&report, 1),
              "[{\"zone\":\"plan\",\"key\":\"k\",\"type\":\"calendar\","
              "\"limit\":1000,\"used\":7,\"remaining\":993,"
              "\"window\":2592000,\"reset\":1796079600,"
              "\"retry_after\":0,"
              "\"period_start\":\"2026-11-01T00:00:00+01:00\","
              "\"period_end\":\"2026-12-01T00:00:00+01:00\"}]");
}

// Seeded and bounded: random subjects (biased to the byte values that need
// care) and extreme numbers.  Every output is valid JSON in valid UTF-8 that
// decodes back to the subject, and never longer than the size promised.
TEST(StatusJsonFuzz, AnyBytesGiveValidJsonWithinBounds)
{
    std::mt19937 rng(20261122);
    const unsigned char special[] = {0x00, 0x0a, 0x1f, '"', '\\', 0x7f, 0x80,
                                     0xbf, 0xc0, 0xc2, 0xe0, 0xed, 0xef,
                                     0xf0, 0xf4, 0xf5, 0xff};
    const std::uint64_t numbers[] = {0, 1, 9, 10, 99999, 1ull << 53,
                                     UINT64_MAX};

    for (int round = 0; round < 20000; round++) {
        std::string subject(rng() % 40, '\0');
        for (char &c : subject) {
            c = static_cast<char>(rng() % 3 == 0
                                  ? special[rng() % sizeof(special)]
                                  : rng() % 256);
        }

        std::string escaped = json_string(subject);
        std::string decoded;
        ASSERT_LE(escaped.size(), 6 * subject.size());
        ASSERT_TRUE(decode_json_string(escaped, &decoded)) << escaped;
        ASSERT_EQ(decoded, subject);

        auto n = [&] { return numbers[rng() % 7]; };
        const AlgorithmRow &row = kAlgorithms[rng() % kAlgorithmCount];
        ZoneReport report{"z_1.a-b", subject, n(), n(), n(), n(), n(), n(),
                          n(), n(), n(), row.interval_note, row.name,
                          rng() % 2 == 0, n()};
        report.concurrency = rng() % 2 == 0;
        report.override = {rng() % 2 == 0, n(), n(), n()};
        report.in_flight = n();
        report.queued = n();
        report.queue_limit = n();

        if (rng() % 2 == 0) {
            report.period_start = "-292277022657-01-27T08:29:52+25:59:59";
            report.period_end = "2026-12-01T00:00:00+01:00";
        }

        std::string out(status_json_max_size(&report, 1) + 1, '#');
        std::size_t len = write_status_json(&report, 1, out.data());
        ASSERT_LE(len, status_json_max_size(&report, 1));
        ASSERT_EQ(out[status_json_max_size(&report, 1)], '#');

        std::string zone = "z" + std::to_string(rng() % 1000);
        std::string member(policy_member_max_size(zone) + 1, '#');
        ASSERT_LE(write_policy_member(zone, n(), n(), member.data()),
                  policy_member_max_size(zone));
        ASSERT_EQ(member.back(), '#');

        std::string field(ratelimit_field_max_size(zone) + 1, '#');
        ASSERT_LE(write_ratelimit_field(zone, n(), n(), field.data()),
                  ratelimit_field_max_size(zone));
        ASSERT_EQ(field.back(), '#');
    }
}

}  // namespace
}  // namespace ratelimit
