#include "calendar/time_zone.hpp"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "calendar/civil_date.hpp"

namespace ratelimit {

namespace {

constexpr std::size_t kMaxZoneName = 64;

bool is_name_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
           || (c >= '0' && c <= '9') || c == '_' || c == '+' || c == '-';
}

// The first of `changes` after utc_s, or their end.
std::vector<OffsetChange>::const_iterator first_after(
    const std::vector<OffsetChange> &changes, std::int64_t utc_s)
{
    return std::upper_bound(
        changes.begin(), changes.end(), utc_s,
        [](std::int64_t t, const OffsetChange &c) { return t < c.at_s; });
}

}  // namespace

TimeZone TimeZone::utc()
{
    return TimeZone(ZoneRules{0, {}, std::nullopt});
}

std::optional<TimeZone> TimeZone::from_tzif(std::string_view bytes,
                                            std::string *error)
{
    std::optional<ZoneRules> rules = read_tzif(bytes, error);

    if (!rules) {
        return std::nullopt;
    }
    return TimeZone(std::move(*rules));
}

std::int64_t TimeZone::offset_at(std::int64_t utc_s) const
{
    const std::vector<OffsetChange> &changes = rules_.changes;

    // RFC 8536: without transitions the footer, if any, decides all time.
    if (changes.empty() || utc_s >= changes.back().at_s) {
        if (rules_.footer) {
            return posix_offset_at(*rules_.footer, utc_s);
        }
        return changes.empty() ? rules_.initial_offset_s
                               : changes.back().offset_s;
    }

    auto after = first_after(changes, utc_s);
    return after == changes.begin() ? rules_.initial_offset_s
                                    : (after - 1)->offset_s;
}

std::optional<std::int64_t> TimeZone::next_change(std::int64_t utc_s) const
{
    const std::vector<OffsetChange> &changes = rules_.changes;

    if (!changes.empty() && utc_s < changes.back().at_s) {
        return first_after(changes, utc_s)->at_s;
    }
    if (rules_.footer) {
        return posix_next_change(*rules_.footer, utc_s);
    }
    return std::nullopt;
}

std::int64_t TimeZone::utc_of_local(std::int64_t local_s) const
{
    // Local time is u + offset_at(u), rising between changes of offset.
    // The answer is the least u where it reaches local_s, at least
    // local_s - kOffsetLimit: walk the spans between changes from there,
    // in each the least u with u + offset >= local_s, if it is in it.
    std::int64_t local = clamp_instant(local_s);
    std::int64_t at = local - kOffsetLimit;

    for (;;) {
        std::int64_t first = std::max(at, local - offset_at(at));
        std::optional<std::int64_t> next = next_change(at);

        if (!next || first < *next) {
            return first;
        }
        at = *next;
    }
}

bool valid_zone_name(std::string_view name)
{
    if (name.empty() || name.size() > kMaxZoneName) {
        return false;
    }

    char before = '/';
    for (char c : name) {
        if (c == '/' ? before == '/' : !is_name_char(c)) {
            return false;
        }
        before = c;
    }
    return before != '/';
}

}  // namespace ratelimit
