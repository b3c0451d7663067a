#include "calendar/civil_date.hpp"

#include <algorithm>

namespace ratelimit {

namespace {

// Days in 400, 100 and 4 Gregorian years, and from 0001-01-01 (day 0 of
// the cycles below) to 1970-01-01.
constexpr std::int64_t kDays400 = 146097;
constexpr std::int64_t kDays100 = 36524;
constexpr std::int64_t kDays4 = 1461;
constexpr std::int64_t kDaysTo1970 = 719162;

// Days of a common year before each month's first.
constexpr int kDaysBefore[12] = {
    0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334
};

// Leap days in the years 1..year (0 for year 0, negative before).
std::int64_t leap_days_through(std::int64_t year)
{
    return floor_div(year, 4) - floor_div(year, 100) + floor_div(year, 400);
}

// Days of `year` before the first of `month` (1..12).
int days_before_month(std::int64_t year, int month)
{
    return kDaysBefore[month - 1] + (month > 2 && is_leap_year(year));
}

}  // namespace

std::int64_t clamp_instant(std::int64_t s)
{
    return std::clamp(s, -kInstantLimit, kInstantLimit);
}

std::int64_t floor_div(std::int64_t a, std::int64_t b)
{
    std::int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

bool is_leap_year(std::int64_t year)
{
    return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
}

int days_in_month(std::int64_t year, int month)
{
    static constexpr int kDays[12] = {
        31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31
    };
    return month == 2 && is_leap_year(year) ? 29 : kDays[month - 1];
}

std::int64_t days_from_civil(std::int64_t year, int month, int day)
{
    std::int64_t before = year - 1;
    return 365 * before + leap_days_through(before)
           + days_before_month(year, month) + day - 1 - kDaysTo1970;
}

CivilDate civil_from_days(std::int64_t days)
{
    // Whole cycles from 0001-01-01, then the years into the last one: a
    // cycle's last century, and a century's last year, are one day longer
    // (the min() keeps that day in them).
    std::int64_t n = days + kDaysTo1970;
    std::int64_t c400 = floor_div(n, kDays400);
    n -= c400 * kDays400;
    std::int64_t c100 = n / kDays100 < 3 ? n / kDays100 : 3;
    n -= c100 * kDays100;
    std::int64_t c4 = n / kDays4;
    n -= c4 * kDays4;
    std::int64_t c1 = n / 365 < 3 ? n / 365 : 3;
    n -= c1 * 365;

    CivilDate date{1 + 400 * c400 + 100 * c100 + 4 * c4 + c1, 1, 1};
    int day_of_year = static_cast<int>(n);

    while (date.month < 12
           && day_of_year >= days_before_month(date.year, date.month + 1))
    {
        date.month++;
    }
    date.day = day_of_year - days_before_month(date.year, date.month) + 1;
    return date;
}

int weekday_of_days(std::int64_t days)
{
    // 1970-01-01 was a Thursday (3).
    return static_cast<int>(days + 3 - 7 * floor_div(days + 3, 7));
}

}  // namespace ratelimit
