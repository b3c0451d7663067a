#include "calendar/local_time_text.hpp"

#include "calendar/civil_date.hpp"

namespace ratelimit {

namespace {

// `value` (>= 0) in decimal, zero-padded to `width` digits.
void append_number(std::string *out, std::int64_t value, int width)
{
    std::string digits = std::to_string(value);

    if (static_cast<int>(digits.size()) < width) {
        out->append(width - digits.size(), '0');
    }
    out->append(digits);
}

// `seconds` (>= 0) as hh:mm, or hh:mm:ss.
void append_hms(std::string *out, std::int64_t seconds, bool with_seconds)
{
    append_number(out, seconds / 3600, 2);
    out->push_back(':');
    append_number(out, seconds / 60 % 60, 2);
    if (with_seconds) {
        out->push_back(':');
        append_number(out, seconds % 60, 2);
    }
}

}  // namespace

std::string iso8601_local(const TimeZone &zone, std::int64_t utc_ms)
{
    std::int64_t t = floor_div(utc_ms, 1000);
    std::int64_t offset = zone.offset_at(t);
    std::int64_t local = t + offset;
    std::int64_t days = floor_div(local, kDaySeconds);
    CivilDate date = civil_from_days(days);
    std::string out;

    if (date.year < 0) {
        out.push_back('-');
    }
    append_number(&out, date.year < 0 ? -date.year : date.year, 4);
    out.push_back('-');
    append_number(&out, date.month, 2);
    out.push_back('-');
    append_number(&out, date.day, 2);
    out.push_back('T');
    append_hms(&out, local - days * kDaySeconds, true);
    out.push_back(offset < 0 ? '-' : '+');
    offset = offset < 0 ? -offset : offset;
    append_hms(&out, offset, offset % 60 != 0);
    return out;
}

}  // namespace ratelimit
