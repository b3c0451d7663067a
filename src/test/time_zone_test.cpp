#include "calendar/time_zone.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "calendar/posix_tz.hpp"
#include "tzif_bytes.hpp"

namespace ratelimit {
namespace {

constexpr std::int64_t kHour = 3600;

const char kBerlinRule[] = "CET-1CEST,M3.5.0,M10.5.0/3";

// The offset changes at `at` from `before` to `after` (seconds east).
void expect_change(const TimeZone &zone, std::int64_t at,
                   std::int64_t before, std::int64_t after)
{
    EXPECT_EQ(zone.offset_at(at - 1), before) << at;
    EXPECT_EQ(zone.offset_at(at), after) << at;
}

std::string refusal(const std::string &bytes)
{
    std::string error;
    std::optional<TimeZone> zone = TimeZone::from_tzif(bytes, &error);

    EXPECT_FALSE(zone);
    return error;
}

// A version 2 file of three types and two transitions; its second header
// is at kHeader2 (the first's 44 bytes, its block's one type and "Z\0"),
// its 64-bit block at kBlock2.
constexpr std::size_t kHeader2 = 44 + 6 + 2;
constexpr std::size_t kBlock2 = kHeader2 + 44;

// Havana's 2026 as version 1 would have it: 32-bit times, no footer.
TzifSpec havana_v1()
{
    TzifSpec spec;
    spec.version = '\0';
    spec.offsets = {-5 * kHour, -4 * kHour};
    spec.times = {utc_s(2026, 3, 8, 5), utc_s(2026, 11, 1, 5)};
    spec.types = {1, 0};
    return spec;
}

TzifSpec three_types()
{
    TzifSpec spec;
    spec.offsets = {3208, 3600, 7200};
    spec.times = {utc_s(1893, 3, 31, 23, 6, 32), utc_s(2025, 3, 30, 1)};
    spec.types = {1, 2};
    spec.footer = kBerlinRule;
    return spec;
}

// `bytes` with the 4-byte count `index` (0 isutcnt .. 5 charcnt) of the
// header at `header` set to `value`.
std::string with_count(std::string bytes, std::size_t header, int index,
                       std::uint32_t value)
{
    std::string count;
    put_be(&count, value, 4);
    return bytes.replace(header + 20 + 4 * index, 4, count);
}

TEST(TimeZoneName, AreaCityNames)
{
    EXPECT_TRUE(valid_zone_name("Europe/Berlin"));
    EXPECT_TRUE(valid_zone_name("America/Argentina/Buenos_Aires"));
    EXPECT_TRUE(valid_zone_name("Etc/GMT+5"));
    EXPECT_TRUE(valid_zone_name("Etc/GMT-14"));
    EXPECT_TRUE(valid_zone_name("UTC"));
    EXPECT_TRUE(valid_zone_name(std::string(64, 'a')));

    EXPECT_FALSE(valid_zone_name(""));
    EXPECT_FALSE(valid_zone_name(std::string(65, 'a')));
    EXPECT_FALSE(valid_zone_name("/etc/passwd"));
    EXPECT_FALSE(valid_zone_name("Europe/../../etc/passwd"));
    EXPECT_FALSE(valid_zone_name(".."));
    EXPECT_FALSE(valid_zone_name("Europe//Berlin"));
    EXPECT_FALSE(valid_zone_name("Europe/"));
    EXPECT_FALSE(valid_zone_name("Europe/Ber lin"));
    EXPECT_FALSE(valid_zone_name("Europe\\Berlin"));
    EXPECT_FALSE(valid_zone_name(std::string("UTC\0", 4)));
}

TEST(TimeZonePosix, ParsesRuleForms)
{
    std::string error;
    std::optional<PosixTz> tz = parse_posix_tz(kBerlinRule, &error);

    ASSERT_TRUE(tz) << error;
    EXPECT_EQ(tz->std_offset_s, 3600);
    EXPECT_EQ(tz->dst_offset_s, 7200);
    EXPECT_EQ(tz->start.kind, 'M');
    EXPECT_EQ(tz->start.month, 3);
    EXPECT_EQ(tz->start.week, 5);
    EXPECT_EQ(tz->start.weekday, 0);
    EXPECT_EQ(tz->start.time_s, 2 * kHour);
    EXPECT_EQ(tz->end.time_s, 3 * kHour);

    tz = parse_posix_tz("<-02>2<-01>,J60/-1:30,300/167", &error);
    ASSERT_TRUE(tz) << error;
    EXPECT_EQ(tz->std_offset_s, -2 * kHour);
    EXPECT_EQ(tz->dst_offset_s, -kHour);
    EXPECT_EQ(tz->start.kind, 'J');
    EXPECT_EQ(tz->start.n, 60);
    EXPECT_EQ(tz->start.time_s, -5400);
    EXPECT_EQ(tz->end.kind, 'n');
    EXPECT_EQ(tz->end.n, 300);
    EXPECT_EQ(tz->end.time_s, 167 * kHour);

    tz = parse_posix_tz("XST+3:15:30XDT-4:00,M12.1.6/24,J1/0", &error);
    ASSERT_TRUE(tz) << error;
    EXPECT_EQ(tz->std_offset_s, -(3 * kHour + 15 * 60 + 30));
    EXPECT_EQ(tz->dst_offset_s, 4 * kHour);

    tz = parse_posix_tz("<+0330>-3:30", &error);
    ASSERT_TRUE(tz) << error;
    EXPECT_FALSE(tz->has_dst);
    EXPECT_EQ(tz->std_offset_s, 12600);
}

TEST(TimeZonePosix, RefusesBadStrings)
{
    const char *bad[] = {
        "", "CET", "CE-1", "CET+", "CET-25", "CET-1:60", "CET-1:5:60",
        "<CET-1", "<C+>-1", "CET-1CEST", "CET-1CEST,M3.5.0",
        "CET-1C,M3.5.0,M10.5.0", "CET-1CEST-25,M3.5.0,M10.5.0",
        "CET-1CEST,M13.5.0,M10.5.0", "CET-1CEST,M0.5.0,M10.5.0",
        "CET-1CEST,M3.6.0,M10.5.0", "CET-1CEST,M3.0.0,M10.5.0",
        "CET-1CEST,M3.5.7,M10.5.0", "CET-1CEST,J0,J365",
        "CET-1CEST,J366,J1", "CET-1CEST,366,J1",
        "CET-1CEST,M3.5.0/168,M10.5.0", "CET-1CEST,M3.5.0,M10.5.0/3x",
        "CET-1CEST,M3.5.0,M10.5.0,", "CET-1 CEST,M3.5.0,M10.5.0",
    };

    for (const char *text : bad) {
        std::string error;
        EXPECT_FALSE(parse_posix_tz(text, &error)) << text;
        EXPECT_FALSE(error.empty()) << text;
    }
}

TEST(TimeZone, UtcIsZeroEverywhere)
{
    TimeZone utc = TimeZone::utc();

    for (std::int64_t t : {std::int64_t{0}, utc_s(2026, 3, 29, 1),
                           utc_s(2100, 1, 1), -utc_s(3000, 1, 1)})
    {
        EXPECT_EQ(utc.offset_at(t), 0);
        EXPECT_EQ(utc.utc_of_local(t), t);
    }
}

// Berlin's changes, last Sunday of March 01:00 UTC and of October, in
// 2026 and in 2100 (the footer's rule: a file's last transition is years
// before).
void expect_berlin_changes(const TimeZone &berlin)
{
    expect_change(berlin, utc_s(2026, 3, 29, 1), kHour, 2 * kHour);
    expect_change(berlin, utc_s(2026, 10, 25, 1), 2 * kHour, kHour);
    expect_change(berlin, utc_s(2100, 3, 28, 1), kHour, 2 * kHour);
    expect_change(berlin, utc_s(2100, 10, 31, 1), 2 * kHour, kHour);
    EXPECT_EQ(berlin.offset_at(utc_s(2026, 1, 1)), kHour);
    EXPECT_EQ(berlin.offset_at(utc_s(2026, 7, 1)), 2 * kHour);
}

// Berlin from its footer alone (a "slim" file): its rule for all time.
TEST(TimeZone, FooterOnlyBerlin)
{
    TimeZone berlin = zone_of(footer_only(kBerlinRule));

    expect_berlin_changes(berlin);
    EXPECT_EQ(berlin.offset_at(utc_s(1900, 7, 1)), 2 * kHour);
}

// In the spring gap, local 02:00 to 02:59:59 names the instant the clocks
// jumped at (03:00 CEST, 01:00 UTC); in the autumn overlap, 02:00 to
// 02:59:59 twice, the earlier instant (CEST).
TEST(TimeZone, LocalTimeInGapAndOverlap)
{
    TimeZone berlin = zone_of(footer_only(kBerlinRule));
    std::int64_t spring = utc_s(2026, 3, 29, 1);
    std::int64_t autumn = utc_s(2026, 10, 25, 1);

    EXPECT_EQ(berlin.utc_of_local(utc_s(2026, 3, 29, 1, 59, 59)),
              spring - 1);
    EXPECT_EQ(berlin.utc_of_local(utc_s(2026, 3, 29, 2)), spring);
    EXPECT_EQ(berlin.utc_of_local(utc_s(2026, 3, 29, 2, 30)), spring);
    EXPECT_EQ(berlin.utc_of_local(utc_s(2026, 3, 29, 3)), spring);
    EXPECT_EQ(berlin.utc_of_local(utc_s(2026, 3, 29, 3, 0, 1)), spring + 1);

    EXPECT_EQ(berlin.utc_of_local(utc_s(2026, 10, 25, 1, 59, 59)),
              autumn - kHour - 1);
    EXPECT_EQ(berlin.utc_of_local(utc_s(2026, 10, 25, 2)), autumn - kHour);
    EXPECT_EQ(berlin.utc_of_local(utc_s(2026, 10, 25, 2, 30)),
              autumn - kHour / 2);
    EXPECT_EQ(berlin.utc_of_local(utc_s(2026, 10, 25, 3)), autumn + kHour);
    EXPECT_EQ(berlin.utc_of_local(utc_s(2026, 7, 1, 12)),
              utc_s(2026, 7, 1, 10));
}

// The machine's file, where there is one: changes long past and fixed by
// rules in force (2026: EU law; 2100 from the footer), the same hour by
// hour as the footer alone through 2026 and 2027.
TEST(TimeZone, SystemBerlinFile)
{
    std::optional<std::string> bytes = system_zone("Europe/Berlin");
    if (!bytes) {
        GTEST_SKIP() << "no /usr/share/zoneinfo/Europe/Berlin";
    }

    TimeZone berlin = zone_of(*bytes);
    TimeZone rule = zone_of(footer_only(kBerlinRule));

    EXPECT_EQ(berlin.offset_at(utc_s(1893, 3, 31, 22)), 3208);
    expect_change(berlin, utc_s(1980, 4, 6, 1), kHour, 2 * kHour);
    expect_berlin_changes(berlin);
    for (std::int64_t t = utc_s(2026, 1, 1); t < utc_s(2028, 1, 1);
         t += kHour)
    {
        ASSERT_EQ(berlin.offset_at(t), rule.offset_at(t)) << t;
        ASSERT_EQ(berlin.utc_of_local(t), rule.utc_of_local(t)) << t;
    }
}

// The southern hemisphere: DST from October to April, across the year.
TEST(TimeZone, SydneyFooter)
{
    TimeZone sydney = zone_of(footer_only("AEST-10AEDT,M10.1.0,M4.1.0/3"));

    expect_change(sydney, utc_s(2026, 4, 4, 16), 11 * kHour, 10 * kHour);
    expect_change(sydney, utc_s(2026, 10, 3, 16), 10 * kHour, 11 * kHour);
    EXPECT_EQ(sydney.offset_at(utc_s(2026, 1, 1)), 11 * kHour);
    EXPECT_EQ(sydney.offset_at(utc_s(2026, 7, 1)), 10 * kHour);
    EXPECT_EQ(sydney.offset_at(utc_s(2026, 12, 31, 23)), 11 * kHour);
    // 02:30 on 2026-10-04 does not exist: 03:00 AEDT.
    EXPECT_EQ(sydney.utc_of_local(utc_s(2026, 10, 4, 2, 30)),
              utc_s(2026, 10, 3, 16));
}

// West of UTC, Jn (Feb 29 not counted) and n (counted) days, a change at
// -01:00 and one at 26:00: J60/-1 is Mar 1 less an hour, 23:00 on Feb 28
// or 29; day 300 is Oct 28 in 2026, Oct 27 in 2028, and 26:00 the next
// day's 02:00 (-02, 04:00 UTC).
TEST(TimeZone, NegativeOffsetJulianAndZeroBasedDays)
{
    TimeZone zone = zone_of(footer_only("XST3XDT,J60/-1,300/26"));

    expect_change(zone, utc_s(2026, 3, 1, 2), -3 * kHour, -2 * kHour);
    expect_change(zone, utc_s(2026, 10, 29, 4), -2 * kHour, -3 * kHour);
    expect_change(zone, utc_s(2028, 3, 1, 2), -3 * kHour, -2 * kHour);
    expect_change(zone, utc_s(2028, 10, 28, 4), -2 * kHour, -3 * kHour);

    TimeZone counted = zone_of(footer_only("XST3XDT,59/0,J365/0"));
    expect_change(counted, utc_s(2028, 2, 29, 3), -3 * kHour, -2 * kHour);
    expect_change(counted, utc_s(2027, 3, 1, 3), -3 * kHour, -2 * kHour);
    expect_change(counted, utc_s(2028, 12, 31, 2), -2 * kHour, -3 * kHour);
}

// Change times of a day and more (RFC 8536's extension, version 3):
// Jerusalem's Friday 02:00 as Thursday 26:00, Santiago's Sunday 00:00 as
// Saturday 24:00.
TEST(TimeZone, ChangeTimesPastADay)
{
    TimeZone jerusalem = zone_of(footer_only("IST-2IDT,M3.4.4/26,M10.5.0"));
    TimeZone santiago =
        zone_of(footer_only("<-04>4<-03>,M9.1.6/24,M4.1.6/24"));

    expect_change(jerusalem, utc_s(2026, 3, 27), 2 * kHour, 3 * kHour);
    expect_change(jerusalem, utc_s(2026, 10, 24, 23), 3 * kHour, 2 * kHour);
    expect_change(santiago, utc_s(2026, 4, 5, 3), -3 * kHour, -4 * kHour);
    expect_change(santiago, utc_s(2026, 9, 6, 4), -4 * kHour, -3 * kHour);
}

// A DST all year, as RFC 8536 writes it: it ends at 25:00 on Dec 31, the
// instant the next year's starts.
TEST(TimeZone, DstAllYear)
{
    TimeZone zone = zone_of(footer_only("EST5EDT,0/0,J365/25"));

    for (std::int64_t t : {utc_s(2026, 1, 1), utc_s(2026, 1, 1, 4),
                           utc_s(2026, 1, 1, 5), utc_s(2026, 7, 1),
                           utc_s(2026, 12, 31, 23), utc_s(2028, 12, 31)})
    {
        EXPECT_EQ(zone.offset_at(t), -4 * kHour) << t;
    }
}

TEST(TimeZone, FixedOffsets)
{
    EXPECT_EQ(zone_of(footer_only("<+0330>-3:30")).offset_at(0), 12600);
    EXPECT_EQ(zone_of(footer_only("<+13>-13")).offset_at(0), 13 * kHour);
    EXPECT_EQ(zone_of(footer_only("UTC0")).offset_at(0), 0);
    EXPECT_EQ(zone_of(footer_only("<-10>+10")).utc_of_local(0), 10 * kHour);
}

// Type 0 before the first transition, the table up to the last, the
// footer from it on; without a footer, the last transition's type.
TEST(TimeZone, TransitionsThenFooter)
{
    TzifSpec spec = three_types();
    TimeZone zone = zone_of(tzif_bytes(spec));

    expect_change(zone, spec.times[0], 3208, kHour);
    expect_change(zone, spec.times[1], kHour, 2 * kHour);
    expect_change(zone, utc_s(2025, 10, 26, 1), 2 * kHour, kHour);
    expect_change(zone, utc_s(2026, 3, 29, 1), kHour, 2 * kHour);
    EXPECT_EQ(zone.offset_at(-utc_s(5000, 1, 1)), 3208);

    spec.footer = "";
    zone = zone_of(tzif_bytes(spec));
    EXPECT_EQ(zone.offset_at(utc_s(2026, 1, 1)), 2 * kHour);
}

// Version 1: the 32-bit block, no footer.  Versions 3 and 4 read as 2.
TEST(TimeZone, Versions)
{
    TzifSpec spec = havana_v1();
    TimeZone v1 = zone_of(tzif_bytes(spec));
    expect_change(v1, spec.times[0], -5 * kHour, -4 * kHour);
    expect_change(v1, spec.times[1], -4 * kHour, -5 * kHour);
    EXPECT_EQ(v1.offset_at(utc_s(2027, 7, 1)), -5 * kHour);

    for (char version : {'2', '3', '4'}) {
        spec.version = version;
        spec.footer = "CST5CDT,M3.2.0/0,M11.1.0/1";
        TimeZone zone = zone_of(tzif_bytes(spec));
        expect_change(zone, utc_s(2027, 3, 14, 5), -5 * kHour, -4 * kHour);
    }
}

// Instants past a billion years are taken at that bound: no overflow.
TEST(TimeZone, ExtremeInstants)
{
    TimeZone berlin = zone_of(tzif_bytes(three_types()));
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

    EXPECT_EQ(berlin.offset_at(kMin), 3208);
    EXPECT_GE(berlin.offset_at(kMax), kHour);
    EXPECT_LE(berlin.utc_of_local(kMin), -kInstantLimit + kHour);
    EXPECT_GE(berlin.utc_of_local(kMax), kInstantLimit - 2 * kHour);
}

TEST(TimeZoneTzif, RefusesMalformedFiles)
{
    std::string good = tzif_bytes(three_types());
    std::string v5 = good;
    v5[4] = v5[kHeader2 + 4] = '5';
    std::string v23 = good;
    v23[kHeader2 + 4] = '3';
    std::string no_footer = good.substr(0, good.rfind('\n', good.size() - 2));
    struct Case {
        std::string bytes;
        const char *reason;
    } cases[] = {
        {"", "truncated header"},
        {"TZXX" + good.substr(4), "not a TZif file"},
        {v5, "unknown TZif version"},
        {v23, "second header's version differs"},
        {with_count(good, 0, 3, 0xffffffff),
         "truncated version 1 data block"},
        {with_count(good, kHeader2, 3, 0xffffffff),
         "more than 4096 transitions"},
        {with_count(good, kHeader2, 3, 1000), "truncated data block"},
        {with_count(good, kHeader2, 4, 0),
         "local time type count not 1 to 256"},
        {with_count(good, kHeader2, 5, 0), "no time zone abbreviations"},
        {with_count(good, kHeader2, 1, 2),
         "standard/UT indicator count not the type count"},
        {with_count(good, kHeader2, 2, 1),
         "leap second records (a right/ zone) are not supported"},
        {good.substr(0, good.size() - 1) + "x\n", "bad footer: bad DST rule"},
        {no_footer, "no footer"},
        {no_footer + "CET-1\n", "no footer"},
    };

    for (const Case &c : cases) {
        EXPECT_EQ(refusal(c.bytes), c.reason);
    }
}

TEST(TimeZoneTzif, RefusesBadRecords)
{
    TzifSpec spec = three_types();
    spec.types[1] = 3;
    EXPECT_EQ(refusal(tzif_bytes(spec)),
              "transition to an unknown local time type");

    spec = three_types();
    std::swap(spec.times[0], spec.times[1]);
    EXPECT_EQ(refusal(tzif_bytes(spec)), "transitions not in ascending order");

    spec = three_types();
    spec.offsets[2] = 26 * kHour;
    EXPECT_EQ(refusal(tzif_bytes(spec)),
              "local time type offset out of range");

    // The first type's isdst, then its abbreviation's index, past range.
    std::size_t type0 = kBlock2 + 2 * 9;
    for (std::size_t at : {type0 + 4, type0 + 5}) {
        std::string bytes = tzif_bytes(three_types());
        bytes[at] = 2;
        EXPECT_EQ(refusal(bytes), "bad local time type");
    }
}

// Every file cut short is refused, of either version.
TEST(TimeZoneTzif, RefusesEveryTruncation)
{
    for (const std::string &bytes : {tzif_bytes(three_types()),
                                     tzif_bytes(havana_v1())})
    {
        zone_of(bytes);
        for (std::size_t n = 0; n < bytes.size(); n++) {
            std::string error;
            EXPECT_FALSE(TimeZone::from_tzif(bytes.substr(0, n), &error))
                << n;
        }
    }
}

}  // namespace
}  // namespace ratelimit
