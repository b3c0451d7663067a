// A TZif file's bytes (RFC 8536, versions 1 to 4) read into the rules of
// a time zone: the offsets and the instants they change at, and the
// footer's TZ string for the instants after the last change.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calendar/posix_tz.hpp"

namespace ratelimit {

// Offsets are in seconds east of UTC, less than 26 h either way (RFC
// 8536's range, -89,999..93,599, rounded out), instants in seconds since
// 1970 UTC.
constexpr std::int32_t kOffsetLimit = 26 * 60 * 60;

struct OffsetChange {
    std::int64_t at_s;       // a transition
    std::int32_t offset_s;   // in force from then on
};

struct ZoneRules {
    std::int32_t initial_offset_s;      // before the first change
    std::vector<OffsetChange> changes;  // strictly ascending
    std::optional<PosixTz> footer;      // from the last change on; none
                                        // in version 1, or empty
};

// At most this many transitions (tzdata's zones have a few hundred), so
// that a zone's memory is bounded whatever the file says.
constexpr std::uint32_t kMaxTransitions = 4096;

// The rules of the file, or nothing with *error set to a short reason.
// Version 1 files are read from their 32-bit block, later ones from their
// 64-bit block and footer.  Leap second records (the "right/" zones,
// whose transitions count leap seconds that Redis's clock does not) are
// refused.
std::optional<ZoneRules> read_tzif(std::string_view bytes,
                                   std::string *error);

}  // namespace ratelimit
