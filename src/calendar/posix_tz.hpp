// A POSIX TZ string as the footer of a TZif file holds it (RFC 8536
// section 3.3, with its extensions: hours of a change's time from -167 to
// 167, names in <...>), parsed and evaluated: the offset it gives an
// instant, and its next change.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ratelimit {

// The day and time of one change of a rule, as the TZ string says it.
struct TzRuleDate {
    char kind;               // 'J': Jn, n 1..365, Feb 29 never counted;
                             // 'n': n 0..365, Feb 29 counted;
                             // 'M': Mm.w.d
    int n;                   // J and n: the day
    int month;               // M: 1..12
    int week;                // M: 1..5, 5 the month's last such weekday
    int weekday;             // M: 0 = Sunday .. 6 = Saturday
    std::int32_t time_s;     // local time of the change after that day's
                             // 00:00, -167 h..167 h (default 02:00)
};

// Offsets are seconds east of UTC (POSIX's sign turned round: "CET-1" is
// +3,600).
struct PosixTz {
    std::int32_t std_offset_s;
    bool has_dst;            // false: the standard offset always
    std::int32_t dst_offset_s;
    TzRuleDate start;        // into DST, its time in standard time
    TzRuleDate end;          // back, its time in DST
};

// The TZ string's rule, or nothing with *error set to why not.  "std
// offset dst" with no rule is refused: zic never writes one, and POSIX
// leaves its rule to the implementation.
std::optional<PosixTz> parse_posix_tz(std::string_view text,
                                      std::string *error);

// Seconds east of UTC at `utc_s`.
std::int32_t posix_offset_at(const PosixTz &tz, std::int64_t utc_s);

// The first change of offset after `utc_s`; nothing for a rule without DST.
std::optional<std::int64_t> posix_next_change(const PosixTz &tz,
                                              std::int64_t utc_s);

}  // namespace ratelimit
