// Calendar periods in a time zone (issue 42): a zone's window of a day, a
// week, a month or a year, beginning at a local wall-clock time
// (`start=`), DST included: a day of 23 or 25 hours, a month of its own
// length.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "calendar/time_zone.hpp"

namespace ratelimit {

enum class PeriodKind { kDay, kWeek, kMonth, kYear };

// Where a period begins on the local clock; each kind reads its fields,
// which must be in their ranges (parse_period_start() makes them so).
struct PeriodStart {
    int hour = 0;      // kDay: 0..23
    int minute = 0;    // kDay: 0..59
    int weekday = 0;   // kWeek: 0 = Monday .. 6 = Sunday, at 00:00
    int month = 1;     // kYear: 1..12
    int day = 1;       // kMonth, kYear: 1..31, at 00:00; past the end of
                       // a month its last day (31: 28 Feb, 30 Apr)
};

// Instants in milliseconds since 1970 UTC: start <= t < end.
struct Period {
    std::int64_t start_ms;
    std::int64_t end_ms;
};

// "day", "week", "month" or "year".
std::optional<PeriodKind> parse_period_kind(std::string_view text);
std::string_view period_kind_name(PeriodKind kind);

// The value of start= for a period of `kind` into *start, or the error
// text: day "HH:MM" (00:00..23:59), week "mon".."sun", month "1".."31",
// year "MM-DD" (a day of that month in a leap year: "02-29" is Feb 28 in
// other years).
std::optional<std::string> parse_period_start(PeriodKind kind,
                                              std::string_view text,
                                              PeriodStart *start);

// The period containing utc_ms.  Its start is the local start mapped by
// TimeZone::utc_of_local(): a start time that does not exist (clocks put
// forward past it) starts it at the end of the gap, one that exists twice
// at the earlier instant.  Instants are taken within +-2^53 ms (Redis's
// clock in Lua's exact integers).
Period period_at(const TimeZone &zone, PeriodKind kind,
                 const PeriodStart &start, std::int64_t utc_ms);

// The periods after and before `period`, one of period_at()'s.
Period next_period(const TimeZone &zone, PeriodKind kind,
                   const PeriodStart &start, const Period &period);
Period previous_period(const TimeZone &zone, PeriodKind kind,
                       const PeriodStart &start, const Period &period);

}  // namespace ratelimit
