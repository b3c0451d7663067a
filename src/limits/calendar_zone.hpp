// Calendar zones (window=day|week|month|year, issue 42): a fixed window
// whose windows are calendar periods in a time zone.  nginx's clock makes
// each call's periods: its current period [S, E) and the next [E, N); the
// call names (S, E) while that clock is in the first half of [S, E), else
// (E, N), and Redis counts in the period its own clock is in, of the two
// (protocol/batch_protocol.hpp): a server whose clock is off by minutes
// still counts where Redis's says.  Redis keeps it as a fixed window of
// 1 ms buckets, the period's count in bucket end - 1.  Here is what nginx
// makes of it: the periods per call, and the functions of the calendar
// row (algorithms.hpp).
#pragma once

#include <cstdint>
#include <utility>

#include "calendar/calendar_period.hpp"
#include "calendar/time_zone.hpp"
#include "limits/policy.hpp"

namespace ratelimit {

// A calendar zone's periods on one worker's clock: the period its clock
// was last in and the ones beside it, computed again only when the clock
// leaves it, so that a request does not compute the calendar.
class CalendarPeriods {
public:
    CalendarPeriods(TimeZone zone, PeriodKind kind, PeriodStart start)
        : zone_(std::move(zone)), kind_(kind), start_(start) {}

    // The periods of a call made at now_ms (nginx's wall clock, ms since
    // 1970) into `policy`, its window the period now_ms is in.
    void make_call(Policy *policy, std::uint64_t now_ms);

    const TimeZone &time_zone() const { return zone_; }
    PeriodKind kind() const { return kind_; }
    const PeriodStart &start() const { return start_; }

private:
    void move_to(std::int64_t now_ms);

    TimeZone zone_;
    PeriodKind kind_;
    PeriodStart start_;
    Period before_{0, 0};
    Period current_{0, 0};
    Period after_{0, 0};
};

// A calendar zone's window as configured, before any call: a period of
// its kind as the calendar has it, without daylight saving time (a day
// 24 h, a month 31 days, a year 366).  Bounds ?interval= of the status
// API; a call's window is its period's own length.
std::uint64_t nominal_period_ms(PeriodKind kind);

// The period of the call's two that Redis counts in at its time now_ms:
// the first while now_ms is before its end, else the second.
Period counted_period(const Policy &policy, std::uint64_t now_ms);

// The call's ends A and B, the script's second and third zone arguments.
std::uint64_t calendar_first_end(const Policy &policy);
std::uint64_t calendar_second_end(const Policy &policy);

// The counted period's length in whole seconds, rounded up: w of
// RateLimit-Policy (82,800 for a day the clocks go forward).
std::uint64_t calendar_window_s(const Policy &policy, std::uint64_t now_ms);

// Remaining: what the limit leaves of `total`, none if `over`; reset:
// until the counted period ends.  `oldest` is not read: it is that end
// less 1 ms, or 0 for a subject with no count.
ZoneStatus calendar_status(const Policy &policy, std::uint64_t total,
                           std::uint64_t oldest, bool over,
                           std::uint64_t now_ms);

// Redis's bucket of the counted period: its end less 1 ms.
CountedBucket calendar_bucket_at(const Policy &policy, std::uint64_t now_ms);

}  // namespace ratelimit
