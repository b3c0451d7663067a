// Civil dates of the proleptic Gregorian calendar as day numbers, days
// since 1970-01-01 (negative before it), without the C library's time
// functions: they read the process's TZ, and the core has no global state.
#pragma once

#include <cstdint>

namespace ratelimit {

constexpr std::int64_t kDaySeconds = 24 * 60 * 60;

// Instants (seconds since 1970) are taken within +-2^55 s, a billion
// years, so that the years, day numbers and local times computed from
// them fit 64 bits.
constexpr std::int64_t kInstantLimit = std::int64_t{1} << 55;

struct CivilDate {
    std::int64_t year;
    int month;   // 1..12
    int day;     // 1..31
};

// `s` moved inside +-kInstantLimit.
std::int64_t clamp_instant(std::int64_t s);

// a / b rounded toward minus infinity (C++ rounds toward zero); b > 0.
std::int64_t floor_div(std::int64_t a, std::int64_t b);

bool is_leap_year(std::int64_t year);

// 28..31.
int days_in_month(std::int64_t year, int month);

// The day number of year-month-day; month 1..12, day 1..31 (a day past
// the month's end counts on into the next month).
std::int64_t days_from_civil(std::int64_t year, int month, int day);

CivilDate civil_from_days(std::int64_t days);

// 0 = Monday .. 6 = Sunday (ISO 8601's order less one).
int weekday_of_days(std::int64_t days);

}  // namespace ratelimit
