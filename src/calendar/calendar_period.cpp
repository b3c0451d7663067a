#include "calendar/calendar_period.hpp"

#include <algorithm>
#include <cstddef>

#include "calendar/civil_date.hpp"

namespace ratelimit {

namespace {

// Instants are taken within +-2^53 ms, so that a period's bounds in
// milliseconds stay inside 64 bits.
constexpr std::int64_t kMsLimit = std::int64_t{1} << 53;

// By PeriodKind.
constexpr std::string_view kKindNames[4] = {"day", "week", "month", "year"};

constexpr std::string_view kWeekdays[7] = {
    "mon", "tue", "wed", "thu", "fri", "sat", "sun"
};

// Two decimal digits at text[pos].
bool two_digits(std::string_view text, std::size_t pos, int *value)
{
    if (pos + 2 > text.size() || text[pos] < '0' || text[pos] > '9'
        || text[pos + 1] < '0' || text[pos + 1] > '9')
    {
        return false;
    }
    *value = (text[pos] - '0') * 10 + (text[pos + 1] - '0');
    return true;
}

// "HH:MM" or "MM-DD": two numbers of two digits around `separator`.
bool two_numbers(std::string_view text, char separator, int *first,
                 int *second)
{
    return text.size() == 5 && text[2] == separator
           && two_digits(text, 0, first) && two_digits(text, 3, second);
}

bool parse_day_start(std::string_view text, PeriodStart *s)
{
    return two_numbers(text, ':', &s->hour, &s->minute) && s->hour <= 23
           && s->minute <= 59;
}

bool parse_week_start(std::string_view text, PeriodStart *s)
{
    auto it = std::find(std::begin(kWeekdays), std::end(kWeekdays), text);

    s->weekday = static_cast<int>(it - std::begin(kWeekdays));
    return it != std::end(kWeekdays);
}

bool parse_month_start(std::string_view text, PeriodStart *s)
{
    if (text.size() == 1 && text[0] >= '1' && text[0] <= '9') {
        s->day = text[0] - '0';
        return true;
    }
    return two_digits(text, 0, &s->day) && text.size() == 2 && s->day >= 1
           && s->day <= 31;
}

// A day of the month in a leap year (2000): "02-29" is allowed.
bool parse_year_start(std::string_view text, PeriodStart *s)
{
    return two_numbers(text, '-', &s->month, &s->day) && s->month >= 1
           && s->month <= 12 && s->day >= 1
           && s->day <= days_in_month(2000, s->month);
}

// Period n's first local second (seconds since 1970 on the local clock).
// Periods are numbered: a day by its day number; a week by the weeks
// after the one starting in the week of Monday 1969-12-29; a month as
// 12 * year + month - 1; a year by itself.
std::int64_t local_start(PeriodKind kind, const PeriodStart &s,
                         std::int64_t n)
{
    switch (kind) {
    case PeriodKind::kDay:
        return n * kDaySeconds + s.hour * 3600 + s.minute * 60;
    case PeriodKind::kWeek:
        // Day 0 (1970-01-01) was a Thursday, weekday 3.
        return (7 * n + s.weekday - 3) * kDaySeconds;
    case PeriodKind::kMonth: {
        std::int64_t year = floor_div(n, 12);
        int month = static_cast<int>(n - 12 * year) + 1;
        int day = std::min(s.day, days_in_month(year, month));
        return days_from_civil(year, month, day) * kDaySeconds;
    }
    case PeriodKind::kYear:
    default: {
        int day = std::min(s.day, days_in_month(n, s.month));
        return days_from_civil(n, s.month, day) * kDaySeconds;
    }
    }
}

// The number of the latest period starting at or before local_s (local).
std::int64_t period_number(PeriodKind kind, const PeriodStart &s,
                           std::int64_t local_s)
{
    std::int64_t days = floor_div(local_s, kDaySeconds);
    CivilDate date = civil_from_days(days);
    std::int64_t n = days;

    if (kind == PeriodKind::kWeek) {
        n = floor_div(days - s.weekday + 3, 7);
    } else if (kind == PeriodKind::kMonth) {
        n = 12 * date.year + date.month - 1;
    } else if (kind == PeriodKind::kYear) {
        n = date.year;
    }
    return local_start(kind, s, n) > local_s ? n - 1 : n;
}

}  // namespace

std::optional<PeriodKind> parse_period_kind(std::string_view text)
{
    for (std::size_t i = 0; i < 4; i++) {
        if (text == kKindNames[i]) {
            return static_cast<PeriodKind>(i);
        }
    }
    return std::nullopt;
}

std::string_view period_kind_name(PeriodKind kind)
{
    return kKindNames[static_cast<std::size_t>(kind)];
}

std::optional<std::string> parse_period_start(PeriodKind kind,
                                              std::string_view text,
                                              PeriodStart *start)
{
    PeriodStart s;
    bool ok;
    const char *use;

    switch (kind) {
    case PeriodKind::kDay:
        ok = parse_day_start(text, &s);
        use = "a day starts at HH:MM, 00:00 to 23:59";
        break;
    case PeriodKind::kWeek:
        ok = parse_week_start(text, &s);
        use = "a week starts on mon, tue, wed, thu, fri, sat or sun";
        break;
    case PeriodKind::kMonth:
        ok = parse_month_start(text, &s);
        use = "a month starts on a day 1 to 31";
        break;
    case PeriodKind::kYear:
    default:
        ok = parse_year_start(text, &s);
        use = "a year starts on a date MM-DD, 01-01 to 12-31";
        break;
    }

    if (!ok) {
        return "invalid start \"" + std::string(text) + "\": " + use;
    }
    *start = s;
    return std::nullopt;
}

Period period_at(const TimeZone &zone, PeriodKind kind,
                 const PeriodStart &start, std::int64_t utc_ms)
{
    // The period whose local start is the latest at or before the local
    // time of t starts at or before t (utc_of_local() rises with local
    // time); a later one may too where the clocks went back: move on
    // while the next starts at or before t.
    std::int64_t t = floor_div(std::clamp(utc_ms, -kMsLimit, kMsLimit),
                               1000);
    std::int64_t n = period_number(kind, start, t + zone.offset_at(t));
    std::int64_t begin = zone.utc_of_local(local_start(kind, start, n));
    std::int64_t end = zone.utc_of_local(local_start(kind, start, n + 1));

    while (end <= t) {
        n++;
        begin = end;
        end = zone.utc_of_local(local_start(kind, start, n + 1));
    }
    return Period{begin * 1000, end * 1000};
}

Period next_period(const TimeZone &zone, PeriodKind kind,
                   const PeriodStart &start, const Period &period)
{
    return period_at(zone, kind, start, period.end_ms);
}

Period previous_period(const TimeZone &zone, PeriodKind kind,
                       const PeriodStart &start, const Period &period)
{
    return period_at(zone, kind, start, period.start_ms - 1);
}

}  // namespace ratelimit
