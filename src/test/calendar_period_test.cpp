#include "calendar/calendar_period.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "calendar/civil_date.hpp"
#include "calendar/local_time_text.hpp"
#include "tzif_bytes.hpp"

namespace ratelimit {
namespace {

constexpr std::int64_t kHour = 3600;

const char kBerlinRule[] = "CET-1CEST,M3.5.0,M10.5.0/3";

// Milliseconds of a UTC date and time.
std::int64_t ms(std::int64_t year, int month, int day, int hour = 0,
                int minute = 0, int second = 0)
{
    return utc_s(year, month, day, hour, minute, second) * 1000;
}

PeriodStart start_of(PeriodKind kind, const char *text)
{
    PeriodStart start;
    std::optional<std::string> error = parse_period_start(kind, text,
                                                          &start);
    EXPECT_FALSE(error) << *error;
    return start;
}

// The period of `kind` (default start) containing `at` (ms) runs from
// `start` to `end` (ms).
void expect_period(const TimeZone &zone, PeriodKind kind,
                   const PeriodStart &start, std::int64_t at,
                   std::int64_t begin, std::int64_t end)
{
    Period p = period_at(zone, kind, start, at);

    EXPECT_EQ(p.start_ms, begin) << iso8601_local(zone, at);
    EXPECT_EQ(p.end_ms, end) << iso8601_local(zone, at);
}

void expect_day(const TimeZone &zone, std::int64_t at, std::int64_t begin,
                std::int64_t end)
{
    expect_period(zone, PeriodKind::kDay, PeriodStart{}, at, begin, end);
}

void expect_month(const TimeZone &zone, std::int64_t at,
                  std::int64_t begin, std::int64_t end)
{
    expect_period(zone, PeriodKind::kMonth, PeriodStart{}, at, begin, end);
}

// Periods tile time: from `at` on, `count` periods, each next starting
// where the last ended, of `min_s` to `max_s` seconds, each found again
// from its first and last millisecond, each the previous of the next.
void expect_tiling(const TimeZone &zone, PeriodKind kind,
                   const PeriodStart &start, std::int64_t at, int count,
                   std::int64_t min_s, std::int64_t max_s)
{
    Period p = period_at(zone, kind, start, at);

    for (int i = 0; i < count; i++) {
        Period next = next_period(zone, kind, start, p);
        Period back = previous_period(zone, kind, start, next);
        Period again = period_at(zone, kind, start, p.end_ms - 1);

        ASSERT_EQ(next.start_ms, p.end_ms) << i;
        ASSERT_GE(p.end_ms - p.start_ms, min_s * 1000) << i;
        ASSERT_LE(p.end_ms - p.start_ms, max_s * 1000) << i;
        ASSERT_EQ(back.start_ms, p.start_ms) << i;
        ASSERT_EQ(again.start_ms, p.start_ms) << i;
        p = next;
    }
}

TEST(CalendarCivilDate, DayNumbers)
{
    EXPECT_EQ(days_from_civil(1970, 1, 1), 0);
    EXPECT_EQ(days_from_civil(1969, 12, 31), -1);
    EXPECT_EQ(days_from_civil(2000, 3, 1), 11017);
    EXPECT_EQ(days_from_civil(2026, 3, 29), 20541);
    EXPECT_EQ(days_from_civil(1, 1, 1), -719162);

    // Every day of +-2,000 years, both ways, one after the other.
    CivilDate last = civil_from_days(-730001);
    for (std::int64_t d = -730000; d <= 730000; d++) {
        CivilDate date = civil_from_days(d);
        ASSERT_EQ(days_from_civil(date.year, date.month, date.day), d);
        bool next_day = date.day == last.day + 1 && date.month == last.month;
        bool next_month = date.day == 1
                          && last.day == days_in_month(last.year,
                                                       last.month);
        ASSERT_TRUE(next_day || next_month) << d;
        last = date;
    }
}

TEST(CalendarCivilDate, LeapYearsAndWeekdays)
{
    EXPECT_FALSE(is_leap_year(1900));
    EXPECT_TRUE(is_leap_year(2000));
    EXPECT_FALSE(is_leap_year(2027));
    EXPECT_TRUE(is_leap_year(2028));
    EXPECT_FALSE(is_leap_year(2100));
    EXPECT_EQ(days_in_month(2027, 2), 28);
    EXPECT_EQ(days_in_month(2028, 2), 29);
    EXPECT_EQ(days_in_month(2026, 4), 30);
    EXPECT_EQ(days_in_month(2026, 1), 31);

    EXPECT_EQ(weekday_of_days(0), 3);                            // Thu
    EXPECT_EQ(weekday_of_days(-1), 2);                           // Wed
    EXPECT_EQ(weekday_of_days(days_from_civil(2026, 3, 2)), 0);  // Mon
    EXPECT_EQ(weekday_of_days(days_from_civil(2026, 3, 29)), 6); // Sun

    EXPECT_EQ(floor_div(-1, 7), -1);
    EXPECT_EQ(floor_div(-7, 7), -1);
    EXPECT_EQ(floor_div(-8, 7), -2);
    EXPECT_EQ(floor_div(7, 7), 1);
}

TEST(CalendarStart, ParsesEachKind)
{
    PeriodStart s = start_of(PeriodKind::kDay, "23:59");
    EXPECT_EQ(s.hour, 23);
    EXPECT_EQ(s.minute, 59);
    EXPECT_EQ(start_of(PeriodKind::kDay, "00:00").hour, 0);
    EXPECT_EQ(start_of(PeriodKind::kWeek, "mon").weekday, 0);
    EXPECT_EQ(start_of(PeriodKind::kWeek, "sun").weekday, 6);
    EXPECT_EQ(start_of(PeriodKind::kMonth, "1").day, 1);
    EXPECT_EQ(start_of(PeriodKind::kMonth, "09").day, 9);
    EXPECT_EQ(start_of(PeriodKind::kMonth, "31").day, 31);
    s = start_of(PeriodKind::kYear, "04-01");
    EXPECT_EQ(s.month, 4);
    EXPECT_EQ(s.day, 1);
    EXPECT_EQ(start_of(PeriodKind::kYear, "02-29").day, 29);
    EXPECT_EQ(start_of(PeriodKind::kYear, "12-31").month, 12);

    EXPECT_EQ(parse_period_kind("day"), PeriodKind::kDay);
    EXPECT_EQ(parse_period_kind("week"), PeriodKind::kWeek);
    EXPECT_EQ(parse_period_kind("month"), PeriodKind::kMonth);
    EXPECT_EQ(parse_period_kind("year"), PeriodKind::kYear);
    EXPECT_FALSE(parse_period_kind("days"));
    EXPECT_FALSE(parse_period_kind(""));
}

TEST(CalendarStart, RefusesInOneLine)
{
    struct Case {
        PeriodKind kind;
        const char *text;
        const char *use;
    } cases[] = {
        {PeriodKind::kDay, "24:00", "a day starts at HH:MM, 00:00 to 23:59"},
        {PeriodKind::kDay, "12:60", nullptr},
        {PeriodKind::kDay, "7:00", nullptr},
        {PeriodKind::kDay, "07:00:00", nullptr},
        {PeriodKind::kDay, "", nullptr},
        {PeriodKind::kWeek, "monday",
         "a week starts on mon, tue, wed, thu, fri, sat or sun"},
        {PeriodKind::kWeek, "Mon", nullptr},
        {PeriodKind::kMonth, "0", "a month starts on a day 1 to 31"},
        {PeriodKind::kMonth, "32", nullptr},
        {PeriodKind::kMonth, "1st", nullptr},
        {PeriodKind::kMonth, "-1", nullptr},
        {PeriodKind::kYear, "13-01",
         "a year starts on a date MM-DD, 01-01 to 12-31"},
        {PeriodKind::kYear, "02-30", nullptr},
        {PeriodKind::kYear, "04-31", nullptr},
        {PeriodKind::kYear, "00-10", nullptr},
        {PeriodKind::kYear, "4-1", nullptr},
    };
    const char *use = nullptr;

    for (const Case &c : cases) {
        PeriodStart s;
        use = c.use ? c.use : use;
        EXPECT_EQ(parse_period_start(c.kind, c.text, &s),
                  "invalid start \"" + std::string(c.text) + "\": " + use);
    }
}

// tz unset: UTC days, weeks from Monday 00:00 UTC, months, years.
TEST(CalendarPeriod, Utc)
{
    TimeZone utc = TimeZone::utc();
    std::int64_t at = ms(2026, 3, 29, 12);

    expect_day(utc, at, ms(2026, 3, 29), ms(2026, 3, 30));
    expect_day(utc, ms(2026, 3, 29), ms(2026, 3, 29), ms(2026, 3, 30));
    expect_day(utc, ms(2026, 3, 30) - 1, ms(2026, 3, 29), ms(2026, 3, 30));
    expect_period(utc, PeriodKind::kWeek, PeriodStart{}, at,
                  ms(2026, 3, 23), ms(2026, 3, 30));
    expect_month(utc, at, ms(2026, 3, 1), ms(2026, 4, 1));
    expect_period(utc, PeriodKind::kYear, PeriodStart{}, at, ms(2026, 1, 1),
                  ms(2027, 1, 1));
    expect_period(utc, PeriodKind::kDay, start_of(PeriodKind::kDay, "06:30"),
                  at, ms(2026, 3, 29, 6, 30), ms(2026, 3, 30, 6, 30));
    expect_day(utc, -1, ms(1969, 12, 31), 0);
}

// Berlin's DST days, 2026-03-29 of 23 hours and 2026-10-25 of 25; the
// last second of November 2026 and the first of December; 2100's spring
// day, from the footer's rule (no transition), the last Sunday of March
// being the 28th.
void expect_berlin_periods(const TimeZone &berlin)
{
    expect_day(berlin, ms(2026, 3, 29, 12), ms(2026, 3, 28, 23),
               ms(2026, 3, 29, 22));
    expect_day(berlin, ms(2026, 3, 28, 23) - 1, ms(2026, 3, 27, 23),
               ms(2026, 3, 28, 23));
    expect_day(berlin, ms(2026, 10, 25, 1), ms(2026, 10, 24, 22),
               ms(2026, 10, 25, 23));
    expect_day(berlin, ms(2026, 10, 25, 23), ms(2026, 10, 25, 23),
               ms(2026, 10, 26, 23));
    expect_month(berlin, ms(2026, 11, 30, 23) - 1000, ms(2026, 10, 31, 23),
                 ms(2026, 11, 30, 23));
    expect_month(berlin, ms(2026, 11, 30, 23), ms(2026, 11, 30, 23),
                 ms(2026, 12, 31, 23));
    expect_day(berlin, ms(2100, 3, 28, 12), ms(2100, 3, 27, 23),
               ms(2100, 3, 28, 22));
}

TEST(CalendarPeriod, BerlinFromFooter)
{
    expect_berlin_periods(zone_of(footer_only(kBerlinRule)));
}

// The machine's Berlin file, where there is one, gives the same.
TEST(CalendarPeriod, SystemBerlinFile)
{
    std::optional<std::string> bytes = system_zone("Europe/Berlin");
    if (!bytes) {
        GTEST_SKIP() << "no /usr/share/zoneinfo/Europe/Berlin";
    }
    expect_berlin_periods(zone_of(*bytes));
}

// The last second of November 2026 in Berlin and the first of December,
// as the status API writes them.
TEST(CalendarPeriod, BerlinMonthBoundary)
{
    TimeZone berlin = zone_of(footer_only(kBerlinRule));
    std::int64_t december = ms(2026, 11, 30, 23);
    Period november = period_at(berlin, PeriodKind::kMonth, PeriodStart{},
                                december - 1000);

    EXPECT_EQ(iso8601_local(berlin, december - 1000),
              "2026-11-30T23:59:59+01:00");
    EXPECT_EQ(november.start_ms, ms(2026, 10, 31, 23));
    EXPECT_EQ(november.end_ms, december);
    EXPECT_EQ(iso8601_local(berlin, november.start_ms),
              "2026-11-01T00:00:00+01:00");
    EXPECT_EQ(iso8601_local(berlin, december),
              "2026-12-01T00:00:00+01:00");

    // October has 31 days and the hour the clocks went back.
    expect_month(berlin, ms(2026, 10, 25), ms(2026, 9, 30, 22),
                 ms(2026, 10, 31, 23));
}

TEST(CalendarPeriod, MonthLengths)
{
    TimeZone utc = TimeZone::utc();
    TimeZone berlin = zone_of(footer_only(kBerlinRule));
    std::int64_t day = 24 * kHour * 1000;

    for (const TimeZone &zone : {utc, berlin}) {
        auto length = [&zone](std::int64_t at) {
            Period p = period_at(zone, PeriodKind::kMonth, PeriodStart{}, at);
            return p.end_ms - p.start_ms;
        };
        EXPECT_EQ(length(ms(2027, 2, 14)), 28 * day);
        EXPECT_EQ(length(ms(2028, 2, 14)), 29 * day);
        EXPECT_EQ(length(ms(2026, 4, 14)), 30 * day);
        EXPECT_EQ(length(ms(2026, 1, 14)), 31 * day);
    }
}

// A billing day of 31: the period from Jan 31 ends on the last day of
// February, the next starts there and ends on Mar 31; 30 Apr in April.
TEST(CalendarPeriod, BillingDayPastMonthEnd)
{
    TimeZone utc = TimeZone::utc();
    PeriodStart day31 = start_of(PeriodKind::kMonth, "31");
    PeriodStart day30 = start_of(PeriodKind::kMonth, "30");

    expect_period(utc, PeriodKind::kMonth, day31, ms(2027, 2, 10),
                  ms(2027, 1, 31), ms(2027, 2, 28));
    expect_period(utc, PeriodKind::kMonth, day31, ms(2027, 2, 28),
                  ms(2027, 2, 28), ms(2027, 3, 31));
    expect_period(utc, PeriodKind::kMonth, day31, ms(2028, 2, 28),
                  ms(2028, 1, 31), ms(2028, 2, 29));
    expect_period(utc, PeriodKind::kMonth, day31, ms(2028, 3, 1),
                  ms(2028, 2, 29), ms(2028, 3, 31));
    expect_period(utc, PeriodKind::kMonth, day31, ms(2026, 5, 1),
                  ms(2026, 4, 30), ms(2026, 5, 31));
    expect_period(utc, PeriodKind::kMonth, day30, ms(2027, 3, 1),
                  ms(2027, 2, 28), ms(2027, 3, 30));

    TimeZone berlin = zone_of(footer_only(kBerlinRule));
    expect_period(berlin, PeriodKind::kMonth, day31, ms(2027, 3, 1),
                  ms(2027, 2, 27, 23), ms(2027, 3, 30, 22));
}

// 2026-03-04 is a Wednesday: its week from Monday 03-02, or from Sunday
// 03-01; Berlin's week of the spring change is an hour short.
TEST(CalendarPeriod, Weeks)
{
    TimeZone utc = TimeZone::utc();
    TimeZone berlin = zone_of(footer_only(kBerlinRule));
    PeriodStart monday = start_of(PeriodKind::kWeek, "mon");
    PeriodStart sunday = start_of(PeriodKind::kWeek, "sun");

    expect_period(utc, PeriodKind::kWeek, monday, ms(2026, 3, 4),
                  ms(2026, 3, 2), ms(2026, 3, 9));
    expect_period(utc, PeriodKind::kWeek, sunday, ms(2026, 3, 4),
                  ms(2026, 3, 1), ms(2026, 3, 8));
    expect_period(utc, PeriodKind::kWeek, sunday, ms(2026, 3, 8),
                  ms(2026, 3, 8), ms(2026, 3, 15));
    expect_period(berlin, PeriodKind::kWeek, monday, ms(2026, 3, 29, 12),
                  ms(2026, 3, 22, 23), ms(2026, 3, 29, 22));
    expect_period(berlin, PeriodKind::kWeek, monday, ms(2026, 3, 29, 22),
                  ms(2026, 3, 29, 22), ms(2026, 4, 5, 22));
    expect_period(utc, PeriodKind::kWeek, monday, 0, ms(1969, 12, 29),
                  ms(1970, 1, 5));
}

// 2100's October, from the footer's rule: 31 days and an hour.
TEST(CalendarPeriod, FarFutureFromTheFooter)
{
    TimeZone berlin = zone_of(footer_only(kBerlinRule));

    expect_month(berlin, ms(2100, 10, 31, 12), ms(2100, 9, 30, 22),
                 ms(2100, 10, 31, 23));
}

// Sydney: 25 hours on 2026-04-05 (back at 03:00), 23 on 2026-10-04.
TEST(CalendarPeriod, SouthernHemisphere)
{
    TimeZone sydney = zone_of(footer_only("AEST-10AEDT,M10.1.0,M4.1.0/3"));

    expect_day(sydney, ms(2026, 4, 5), ms(2026, 4, 4, 13),
               ms(2026, 4, 5, 14));
    expect_day(sydney, ms(2026, 10, 4), ms(2026, 10, 3, 14),
               ms(2026, 10, 4, 13));
    expect_period(sydney, PeriodKind::kYear, PeriodStart{}, ms(2026, 6, 1),
                  ms(2025, 12, 31, 13), ms(2026, 12, 31, 13));
}

// West of UTC with J and n days: DST from Feb 28 23:00 (-03) to Oct 29
// 02:00 (-02) in 2026.
TEST(CalendarPeriod, NegativeOffsetJulianRule)
{
    TimeZone zone = zone_of(footer_only("XST3XDT,J60/-1,300/26"));

    expect_day(zone, ms(2026, 2, 28, 12), ms(2026, 2, 28, 3),
               ms(2026, 3, 1, 2));
    expect_day(zone, ms(2026, 3, 1, 12), ms(2026, 3, 1, 2),
               ms(2026, 3, 2, 2));
    expect_day(zone, ms(2026, 10, 29, 12), ms(2026, 10, 29, 2),
               ms(2026, 10, 30, 3));
    expect_month(zone, ms(2026, 3, 15), ms(2026, 3, 1, 2), ms(2026, 4, 1, 2));
    EXPECT_EQ(iso8601_local(zone, ms(2026, 3, 1, 2)),
              "2026-03-01T00:00:00-02:00");
}

// Midnight that does not exist: Havana's clocks go from 00:00 to 01:00
// on 2026-03-08 (05:00 UTC), back from 01:00 to 00:00 on 11-01.  The
// 8th starts at 01:00 (-04); the 7th is 24 hours, the 8th 23; Nov 1
// starts at its first midnight (-04) and is 25 hours.
TEST(CalendarPeriod, MidnightThatDoesNotExist)
{
    TzifSpec spec;
    spec.offsets = {-5 * kHour, -4 * kHour};
    spec.times = {utc_s(2026, 3, 8, 5), utc_s(2026, 11, 1, 5)};
    spec.types = {1, 0};
    TimeZone havana = zone_of(tzif_bytes(spec));

    expect_day(havana, ms(2026, 3, 8, 5) - 1, ms(2026, 3, 7, 5),
               ms(2026, 3, 8, 5));
    expect_day(havana, ms(2026, 3, 8, 5), ms(2026, 3, 8, 5),
               ms(2026, 3, 9, 4));
    expect_day(havana, ms(2026, 11, 1, 5, 30), ms(2026, 11, 1, 4),
               ms(2026, 11, 2, 5));
    expect_day(havana, ms(2026, 11, 1, 4) - 1, ms(2026, 10, 31, 4),
               ms(2026, 11, 1, 4));
    EXPECT_EQ(iso8601_local(havana, ms(2026, 3, 8, 5)),
              "2026-03-08T01:00:00-04:00");

    // Santiago's footer does it every September (Saturday 24:00).
    TimeZone santiago =
        zone_of(footer_only("<-04>4<-03>,M9.1.6/24,M4.1.6/24"));
    expect_day(santiago, ms(2026, 9, 6, 12), ms(2026, 9, 6, 4),
               ms(2026, 9, 7, 3));
}

// start=02:30 on Berlin's autumn day: 02:30 comes twice, the day starts
// at the first (CEST, 00:30 UTC); 02:10 CET, after it, is in that day
// though 02:10 CEST, before it, is in the day before.
TEST(CalendarPeriod, StartInOverlapTakesEarlierInstant)
{
    TimeZone berlin = zone_of(footer_only(kBerlinRule));
    PeriodStart at0230 = start_of(PeriodKind::kDay, "02:30");

    expect_period(berlin, PeriodKind::kDay, at0230, ms(2026, 10, 25, 1, 10),
                  ms(2026, 10, 25, 0, 30), ms(2026, 10, 26, 1, 30));
    expect_period(berlin, PeriodKind::kDay, at0230, ms(2026, 10, 25, 0, 10),
                  ms(2026, 10, 24, 0, 30), ms(2026, 10, 25, 0, 30));
    // In spring 02:30 does not exist: the day starts at 03:00 CEST.
    expect_period(berlin, PeriodKind::kDay, at0230, ms(2026, 3, 29, 12),
                  ms(2026, 3, 29, 1), ms(2026, 3, 30, 0, 30));
}

// A fiscal year from April 1, and one from Feb 29 (Feb 28 in 2027).
TEST(CalendarPeriod, YearStarts)
{
    TimeZone berlin = zone_of(footer_only(kBerlinRule));
    PeriodStart april = start_of(PeriodKind::kYear, "04-01");
    PeriodStart leap = start_of(PeriodKind::kYear, "02-29");

    expect_period(berlin, PeriodKind::kYear, april, ms(2026, 6, 15),
                  ms(2026, 3, 31, 22), ms(2027, 3, 31, 22));
    expect_period(berlin, PeriodKind::kYear, april, ms(2026, 3, 31, 22) - 1,
                  ms(2025, 3, 31, 22), ms(2026, 3, 31, 22));
    expect_period(TimeZone::utc(), PeriodKind::kYear, leap, ms(2027, 6, 1),
                  ms(2027, 2, 28), ms(2028, 2, 29));
}

// Samoa skipped 2011-12-30 (-10 to +14 at its start): no period is
// empty, the 29th's next is the 31st.
TEST(CalendarPeriod, SkippedDay)
{
    TzifSpec spec;
    spec.offsets = {-10 * kHour, 14 * kHour};
    spec.times = {utc_s(2011, 12, 30, 10)};
    spec.types = {1};
    TimeZone apia = zone_of(tzif_bytes(spec));
    Period dec29 = period_at(apia, PeriodKind::kDay, PeriodStart{},
                             ms(2011, 12, 30, 10) - 1);
    Period dec31 = next_period(apia, PeriodKind::kDay, PeriodStart{}, dec29);

    EXPECT_EQ(dec29.start_ms, ms(2011, 12, 29, 10));
    EXPECT_EQ(dec29.end_ms, ms(2011, 12, 30, 10));
    EXPECT_EQ(dec31.start_ms, ms(2011, 12, 30, 10));
    EXPECT_EQ(dec31.end_ms, ms(2011, 12, 31, 10));
    EXPECT_EQ(iso8601_local(apia, dec31.start_ms),
              "2011-12-31T00:00:00+14:00");
    EXPECT_EQ(previous_period(apia, PeriodKind::kDay, PeriodStart{},
                              dec31).start_ms, dec29.start_ms);
}

// Periods follow each other without gap or overlap through DST years.
TEST(CalendarPeriod, NextAndPreviousTile)
{
    TimeZone berlin = zone_of(footer_only(kBerlinRule));
    TimeZone sydney = zone_of(footer_only("AEST-10AEDT,M10.1.0,M4.1.0/3"));
    std::int64_t day = 24 * kHour;
    std::int64_t at = ms(2025, 12, 30);

    for (const TimeZone &zone : {berlin, sydney, TimeZone::utc()}) {
        expect_tiling(zone, PeriodKind::kDay, PeriodStart{}, at, 800,
                      day - kHour, day + kHour);
        expect_tiling(zone, PeriodKind::kDay,
                      start_of(PeriodKind::kDay, "02:30"), at, 800,
                      day - kHour, day + kHour);
        expect_tiling(zone, PeriodKind::kWeek,
                      start_of(PeriodKind::kWeek, "sun"), at, 120,
                      7 * day - kHour, 7 * day + kHour);
        expect_tiling(zone, PeriodKind::kMonth,
                      start_of(PeriodKind::kMonth, "31"), at, 48,
                      28 * day - kHour, 31 * day + kHour);
        expect_tiling(zone, PeriodKind::kYear,
                      start_of(PeriodKind::kYear, "02-29"), at, 9,
                      365 * day - kHour, 366 * day + kHour);
    }
}

// Instants are taken within +-2^53 ms; the periods there hold them.
TEST(CalendarPeriod, ExtremeInstants)
{
    TimeZone berlin = zone_of(footer_only(kBerlinRule));
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
    constexpr std::int64_t kLimit = std::int64_t{1} << 53;

    for (PeriodKind kind : {PeriodKind::kDay, PeriodKind::kWeek,
                            PeriodKind::kMonth, PeriodKind::kYear})
    {
        Period high = period_at(berlin, kind, PeriodStart{}, kMax);
        Period low = period_at(berlin, kind, PeriodStart{}, kMin);
        EXPECT_LE(high.start_ms, kLimit);
        EXPECT_GT(high.end_ms, kLimit);
        EXPECT_LE(low.start_ms, -kLimit);
        EXPECT_GT(low.end_ms, -kLimit);
    }
    EXPECT_EQ(iso8601_local(TimeZone::utc(), kMin).substr(0, 11),
              "-292275055-");
}

TEST(CalendarText, Iso8601LocalTime)
{
    TimeZone utc = TimeZone::utc();
    TimeZone tehran = zone_of(footer_only("<+0330>-3:30"));
    TzifSpec lmt;
    lmt.offsets = {3208};
    TimeZone berlin1893 = zone_of(tzif_bytes(lmt));

    EXPECT_EQ(iso8601_local(utc, 0), "1970-01-01T00:00:00+00:00");
    EXPECT_EQ(iso8601_local(utc, -1), "1969-12-31T23:59:59+00:00");
    EXPECT_EQ(iso8601_local(utc, ms(2026, 11, 30, 23) + 999),
              "2026-11-30T23:00:00+00:00");
    EXPECT_EQ(iso8601_local(tehran, ms(2026, 1, 1)),
              "2026-01-01T03:30:00+03:30");
    EXPECT_EQ(iso8601_local(zone_of(footer_only("<-0930>9:30")), 0),
              "1969-12-31T14:30:00-09:30");
    EXPECT_EQ(iso8601_local(berlin1893, 0), "1970-01-01T00:53:28+00:53:28");
    EXPECT_EQ(iso8601_local(utc, ms(12026, 1, 1)),
              "12026-01-01T00:00:00+00:00");
    EXPECT_EQ(iso8601_local(utc, ms(-1, 1, 1)), "-0001-01-01T00:00:00+00:00");
}

}  // namespace
}  // namespace ratelimit
