#include "calendar/posix_tz.hpp"

#include <cstddef>

#include "calendar/civil_date.hpp"

namespace ratelimit {

namespace {

constexpr std::int32_t kHourSeconds = 60 * 60;

// Hours of an offset (POSIX: 0..24) and of a change's time (RFC 8536's
// extension: -167..167, a week less an hour either way).
constexpr int kOffsetHours = 24;
constexpr int kChangeHours = 167;

// The years either side of an instant's whose changes are looked at: a
// change lies at most 167 h + 26 h off its own year, so the latest change
// at or before an instant and the first after it are among them.
constexpr int kYearsAround = 2;
constexpr int kChanges = 2 * (2 * kYearsAround + 1);

bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

bool is_alpha(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

// A TZ string read from the left: each read_*() moves `pos` past what it
// read, and is false where the text does not fit.
struct TzReader {
    std::string_view text;
    std::size_t pos;

    bool done() const { return pos == text.size(); }
    bool at(char c) const { return pos < text.size() && text[pos] == c; }

    bool take(char c)
    {
        if (!at(c)) {
            return false;
        }
        pos++;
        return true;
    }

    bool read_number(int digits, int max, int *value);
    bool read_name();
    bool read_hms(int max_hours, std::int32_t *seconds);
    bool read_rule_date(TzRuleDate *date);
};

// 1 to `digits` decimal digits, at most `max`.
bool TzReader::read_number(int digits, int max, int *value)
{
    std::size_t start = pos;

    *value = 0;
    while (pos < text.size() && is_digit(text[pos])
           && pos - start < static_cast<std::size_t>(digits))
    {
        *value = *value * 10 + (text[pos++] - '0');
    }
    return pos > start && *value <= max;
}

// A zone's abbreviation: 3 or more letters, or <3 or more of [A-Za-z0-9+-]>.
bool TzReader::read_name()
{
    bool quoted = take('<');
    std::size_t start = pos;

    while (pos < text.size()
           && (is_alpha(text[pos])
               || (quoted && (is_digit(text[pos]) || text[pos] == '+'
                              || text[pos] == '-'))))
    {
        pos++;
    }
    return pos - start >= 3 && (!quoted || take('>'));
}

// [+|-]hh[:mm[:ss]] in seconds, hh at most max_hours.
bool TzReader::read_hms(int max_hours, std::int32_t *seconds)
{
    int sign = take('-') ? -1 : (take('+'), 1);
    int h, m = 0, s = 0;

    if (!read_number(3, max_hours, &h)
        || (take(':') && (!read_number(2, 59, &m)
                          || (take(':') && !read_number(2, 59, &s)))))
    {
        return false;
    }
    *seconds = sign * (h * kHourSeconds + m * 60 + s);
    return true;
}

// Jn, n or Mm.w.d, then [/time].
bool TzReader::read_rule_date(TzRuleDate *date)
{
    bool ok;

    *date = TzRuleDate{'n', 0, 0, 0, 0, 2 * kHourSeconds};
    if (take('J')) {
        date->kind = 'J';
        ok = read_number(3, 365, &date->n) && date->n >= 1;
    } else if (take('M')) {
        date->kind = 'M';
        ok = read_number(2, 12, &date->month) && date->month >= 1
             && take('.') && read_number(1, 5, &date->week)
             && date->week >= 1
             && take('.') && read_number(1, 6, &date->weekday);
    } else {
        ok = read_number(3, 365, &date->n);
    }
    return ok && (!take('/') || read_hms(kChangeHours, &date->time_s));
}

std::optional<PosixTz> refuse(std::string *error, const char *why)
{
    *error = why;
    return std::nullopt;
}

// The day number of a rule's day in `year`.
std::int64_t rule_day(const TzRuleDate &date, std::int64_t year)
{
    std::int64_t jan1 = days_from_civil(year, 1, 1);

    if (date.kind == 'J') {
        return jan1 + date.n - 1 + (date.n >= 60 && is_leap_year(year));
    }
    if (date.kind == 'n') {
        return jan1 + date.n;
    }

    // The first such weekday of the month, then w - 1 weeks on; the fifth
    // is the last, one week back where the month has only four.
    std::int64_t first = days_from_civil(year, date.month, 1);
    int sunday_based = (weekday_of_days(first) + 1) % 7;
    int day = (date.weekday - sunday_based + 7) % 7 + (date.week - 1) * 7;

    if (day >= days_in_month(year, date.month)) {
        day -= 7;
    }
    return first + day;
}

struct TzChange {
    std::int64_t at_s;       // UTC
    std::int32_t offset_s;   // in force from then on
};

// The changes of the years around the one of `utc_s` (clamped), in
// order of year, each year's change into DST first.
void changes_around(const PosixTz &tz, std::int64_t utc_s,
                    TzChange *changes)
{
    std::int64_t days = floor_div(clamp_instant(utc_s) + tz.std_offset_s,
                                  kDaySeconds);
    std::int64_t year = civil_from_days(days).year - kYearsAround;

    for (int i = 0; i < kChanges; i += 2, year++) {
        changes[i] = {rule_day(tz.start, year) * kDaySeconds
                      + tz.start.time_s - tz.std_offset_s,
                      tz.dst_offset_s};
        changes[i + 1] = {rule_day(tz.end, year) * kDaySeconds
                          + tz.end.time_s - tz.dst_offset_s,
                          tz.std_offset_s};
    }
}

}  // namespace

std::optional<PosixTz> parse_posix_tz(std::string_view text,
                                      std::string *error)
{
    TzReader r{text, 0};
    PosixTz tz{};
    std::int32_t west;

    if (!r.read_name() || !r.read_hms(kOffsetHours, &west)) {
        return refuse(error, "bad standard time name or offset");
    }
    tz.std_offset_s = -west;
    if (r.done()) {
        return tz;
    }

    // POSIX's default DST is an hour ahead of standard time.
    tz.has_dst = true;
    tz.dst_offset_s = tz.std_offset_s + kHourSeconds;
    if (!r.read_name()) {
        return refuse(error, "bad DST name");
    }
    if (!r.at(',') && !r.done()) {
        if (!r.read_hms(kOffsetHours, &west)) {
            return refuse(error, "bad DST offset");
        }
        tz.dst_offset_s = -west;
    }

    if (!r.take(',')) {
        return refuse(error, "DST without a rule");
    }
    if (!r.read_rule_date(&tz.start) || !r.take(',')
        || !r.read_rule_date(&tz.end) || !r.done())
    {
        return refuse(error, "bad DST rule");
    }
    return tz;
}

std::int32_t posix_offset_at(const PosixTz &tz, std::int64_t utc_s)
{
    if (!tz.has_dst) {
        return tz.std_offset_s;
    }

    // The latest change at or before the instant; of two at one instant
    // the later year's (a DST all year ends one year as it starts the
    // next: "EST5EDT,0/0,J365/25" stays in DST).
    TzChange changes[kChanges];
    const TzChange *latest = nullptr;

    changes_around(tz, utc_s, changes);
    for (const TzChange &c : changes) {
        if (c.at_s <= utc_s && (!latest || c.at_s >= latest->at_s)) {
            latest = &c;
        }
    }
    return latest ? latest->offset_s : tz.std_offset_s;
}

std::optional<std::int64_t> posix_next_change(const PosixTz &tz,
                                              std::int64_t utc_s)
{
    if (!tz.has_dst) {
        return std::nullopt;
    }

    TzChange changes[kChanges];
    std::optional<std::int64_t> next;

    changes_around(tz, utc_s, changes);
    for (const TzChange &c : changes) {
        if (c.at_s > utc_s && (!next || c.at_s < *next)) {
            next = c.at_s;
        }
    }
    return next;
}

}  // namespace ratelimit
