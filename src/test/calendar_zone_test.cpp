#include "limits/calendar_zone.hpp"

#include <gtest/gtest.h>

#include "limits/algorithms.hpp"
#include "scripts/script_batch.hpp"
#include "tzif_bytes.hpp"

namespace ratelimit {
namespace {

const char kBerlinRule[] = "CET-1CEST,M3.5.0,M10.5.0/3";

// Milliseconds of a UTC date and time.
std::uint64_t ms(std::int64_t year, int month, int day, int hour = 0,
                 int minute = 0, int second = 0)
{
    return static_cast<std::uint64_t>(
        utc_s(year, month, day, hour, minute, second) * 1000);
}

CalendarPeriods berlin(PeriodKind kind, PeriodStart start = {})
{
    return CalendarPeriods(zone_of(footer_only(kBerlinRule)), kind, start);
}

Policy made_at(CalendarPeriods *periods, std::uint64_t now_ms)
{
    Policy policy{100, 0, 0, Algorithm::kCalendar};
    periods->make_call(&policy, now_ms);
    return policy;
}

void expect_periods(const Policy &policy, std::uint64_t start,
                    std::uint64_t first_end, std::uint64_t second_end)
{
    EXPECT_EQ(policy.periods.start_ms, start);
    EXPECT_EQ(policy.periods.first_end_ms, first_end);
    EXPECT_EQ(policy.periods.second_end_ms, second_end);
}

// November 2026 in Berlin is [Oct 31 23:00 UTC, Nov 30 23:00 UTC): in its
// first half a call names October's end and November's, in its second
// half November's and December's.  Its window is November's 30 days.
TEST(CalendarZone, ACallNamesTheCurrentPeriodAndTheOneBesideIt)
{
    CalendarPeriods month = berlin(PeriodKind::kMonth);
    std::uint64_t oct = ms(2026, 9, 30, 22), nov = ms(2026, 10, 31, 23);
    std::uint64_t dec = ms(2026, 11, 30, 23), jan = ms(2026, 12, 31, 23);

    Policy first = made_at(&month, nov + 1000);
    expect_periods(first, oct, nov, dec);
    EXPECT_EQ(first.window_ms, dec - nov);
    EXPECT_EQ(first.bucket_ms, dec - nov);

    // 15 days in: the middle of a month of 30.
    expect_periods(made_at(&month, nov + 15 * 86400000 - 1), oct, nov, dec);
    expect_periods(made_at(&month, nov + 15 * 86400000), nov, dec, jan);
    expect_periods(made_at(&month, dec - 1), nov, dec, jan);

    // Past the end, on into December; and back (a clock stepped back).
    Policy december = made_at(&month, dec);
    expect_periods(december, nov, dec, jan);
    EXPECT_EQ(december.window_ms, jan - dec);
    expect_periods(made_at(&month, dec - 1), nov, dec, jan);
    expect_periods(made_at(&month, nov), oct, nov, dec);
}

// The script's arguments: the limit, A, B and the kind.
TEST(CalendarZone, ItsArgumentsAreTheCallsEnds)
{
    CalendarPeriods day = berlin(PeriodKind::kDay);
    Policy policy = made_at(&day, ms(2026, 3, 29, 12));
    char out[kZoneArgsMaxSize];
    std::string args(out, write_zone_args(policy, out));

    // The spring day of 23 hours, Mar 28 23:00 to Mar 29 22:00 UTC, past
    // its middle: its end and the next day's.
    EXPECT_EQ(args, "$3\r\n100\r\n$13\r\n1774821600000\r\n"
                    "$13\r\n1774908000000\r\n$1\r\nc\r\n");
    EXPECT_EQ(policy.window_ms, 23u * 3600 * 1000);
}

// What the reply means: the period of Redis's time, of the two.
TEST(CalendarZone, TheCountedPeriodIsRedissClocks)
{
    CalendarPeriods day = berlin(PeriodKind::kDay);
    // Autumn's day of 25 hours, Oct 24 22:00 to Oct 25 23:00 UTC, in its
    // first half: the day before, of 24 hours, is named too.
    std::uint64_t start = ms(2026, 10, 24, 22), end = ms(2026, 10, 25, 23);
    Policy policy = made_at(&day, start + 3600000);
    const AlgorithmRow &row = row_of(policy);

    EXPECT_EQ(row.window_s(policy, start + 60000), 90000u);
    EXPECT_EQ(row.window_s(policy, start - 60000), 86400u);

    ZoneStatus status = row.status(policy, 30, end - 1, false, start);
    EXPECT_EQ(status.limit, 100u);
    EXPECT_EQ(status.remaining, 70u);
    EXPECT_EQ(status.reset_ms, end - start);

    // Redis's clock a minute behind nginx's at midnight: the day before.
    status = row.status(policy, 100, start - 1, true, start - 60000);
    EXPECT_EQ(status.remaining, 0u);
    EXPECT_EQ(status.reset_ms, 60000u);

    CountedBucket bucket = row.bucket_at(policy, start + 5);
    EXPECT_EQ(bucket.number, end - 1);
    EXPECT_EQ(bucket.end_ms, end);
    EXPECT_EQ(row.bucket_at(policy, start - 5).number, start - 1);
}

// Weeks from Monday and from the default (Monday too), and a billing day
// of 31 in February: Feb 28 2027, Feb 29 2028, local midnight.
TEST(CalendarZone, StartsMoveThePeriods)
{
    PeriodStart sunday;
    sunday.weekday = 6;
    CalendarPeriods week = berlin(PeriodKind::kWeek, sunday);
    // Sunday 2026-11-15 00:00 CET is Nov 14 23:00 UTC.
    Policy policy = made_at(&week, ms(2026, 11, 16, 12));
    EXPECT_EQ(policy.window_ms, 7u * 86400000);
    EXPECT_EQ(counted_period(policy, ms(2026, 11, 16, 12)).start_ms,
              static_cast<std::int64_t>(ms(2026, 11, 14, 23)));

    PeriodStart billing;
    billing.day = 31;
    CalendarPeriods month = berlin(PeriodKind::kMonth, billing);
    Policy feb = made_at(&month, ms(2027, 2, 27, 12));
    expect_periods(feb, ms(2027, 1, 30, 23), ms(2027, 2, 27, 23),
                   ms(2027, 3, 30, 22));
    Policy leap = made_at(&month, ms(2028, 2, 28, 12));
    EXPECT_EQ(counted_period(leap, ms(2028, 2, 28, 12)).end_ms,
              static_cast<std::int64_t>(ms(2028, 2, 28, 23)));
}

TEST(CalendarZone, NominalPeriods)
{
    constexpr std::uint64_t kDayMs = 86400000;

    EXPECT_EQ(nominal_period_ms(PeriodKind::kDay), kDayMs);
    EXPECT_EQ(nominal_period_ms(PeriodKind::kWeek), 7 * kDayMs);
    EXPECT_EQ(nominal_period_ms(PeriodKind::kMonth), 31 * kDayMs);
    EXPECT_EQ(nominal_period_ms(PeriodKind::kYear), 366 * kDayMs);
}

}  // namespace
}  // namespace ratelimit
