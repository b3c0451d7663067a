// An IANA time zone as its TZif file describes it (tzif_reader.hpp), or
// UTC: the offset in force at an instant, and the instant a local
// wall-clock time names.  Instants are seconds since 1970 UTC; local
// times seconds since 1970 on the zone's wall clock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "calendar/tzif_reader.hpp"

namespace ratelimit {

class TimeZone {
public:
    // UTC, for a zone without tz=.
    static TimeZone utc();

    // The zone of a TZif file's bytes, or nothing with *error set to a
    // short reason ("truncated data block").
    static std::optional<TimeZone> from_tzif(std::string_view bytes,
                                             std::string *error);

    // Seconds east of UTC in force at utc_s: before the first transition
    // the first local time type's, from the last one on the footer's
    // (the last transition's without one).
    std::int64_t offset_at(std::int64_t utc_s) const;

    // The first instant whose local time is local_s or later: the instant
    // local_s names; in a gap (clocks put forward past it) the end of the
    // gap, the instant the clocks jumped at; in an overlap (clocks put
    // back, local_s twice) the earlier instant.
    std::int64_t utc_of_local(std::int64_t local_s) const;

private:
    explicit TimeZone(ZoneRules rules) : rules_(std::move(rules)) {}

    // The first change of offset after utc_s, if any.
    std::optional<std::int64_t> next_change(std::int64_t utc_s) const;

    ZoneRules rules_;
};

// A tz= value the nginx side may append to its zone directory: names of
// [A-Za-z0-9_+-] joined by single '/'s ("America/Argentina/Buenos_Aires",
// "Etc/GMT+5", "UTC"), 1 to 64 bytes.  No '.', so no "..", and no
// leading '/'.
bool valid_zone_name(std::string_view name);

}  // namespace ratelimit
