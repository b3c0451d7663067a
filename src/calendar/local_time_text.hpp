// An instant as ISO 8601 local time in a zone, for the status API: the
// local date and time to the second, then the offset in force,
// "2026-11-01T00:00:00+01:00" ("+00:00" in UTC).
#pragma once

#include <cstdint>
#include <string>

#include "calendar/time_zone.hpp"

namespace ratelimit {

// utc_ms rounded down to its second.  An offset of odd seconds (local
// mean time before 1900) is written +hh:mm:ss.  A year before 1 has a
// '-' (year 0 is 1 BC), one after 9999 more digits.
std::string iso8601_local(const TimeZone &zone, std::int64_t utc_ms);

}  // namespace ratelimit
