#include "limits/calendar_zone.hpp"

#include "calendar/civil_date.hpp"
#include "limits/window_zone.hpp"

namespace ratelimit {

void CalendarPeriods::make_call(Policy *policy, std::uint64_t now_ms)
{
    auto now = static_cast<std::int64_t>(now_ms);

    move_to(now);

    std::int64_t length = current_.end_ms - current_.start_ms;
    bool first_half = now - current_.start_ms < length / 2;
    const Period &first = first_half ? before_ : current_;
    const Period &second = first_half ? current_ : after_;

    policy->periods = {static_cast<std::uint64_t>(first.start_ms),
                       static_cast<std::uint64_t>(first.end_ms),
                       static_cast<std::uint64_t>(second.end_ms)};
    policy->window_ms = static_cast<std::uint64_t>(length);
    policy->bucket_ms = policy->window_ms;
}

// Onto the period containing now_ms: the next one as the clock moves on,
// else computed afresh (the first call, a clock stepped back).
void CalendarPeriods::move_to(std::int64_t now_ms)
{
    if (now_ms >= current_.start_ms && now_ms < current_.end_ms) {
        return;
    }

    if (now_ms >= after_.start_ms && now_ms < after_.end_ms) {
        before_ = current_;
        current_ = after_;
    } else {
        current_ = period_at(zone_, kind_, start_, now_ms);
        before_ = previous_period(zone_, kind_, start_, current_);
    }

    after_ = next_period(zone_, kind_, start_, current_);
}

std::uint64_t nominal_period_ms(PeriodKind kind)
{
    constexpr std::uint64_t kDayMs = kDaySeconds * 1000;

    switch (kind) {
    case PeriodKind::kDay:
        return kDayMs;
    case PeriodKind::kWeek:
        return 7 * kDayMs;
    case PeriodKind::kMonth:
        return 31 * kDayMs;
    case PeriodKind::kYear:
    default:
        return 366 * kDayMs;
    }
}

Period counted_period(const Policy &policy, std::uint64_t now_ms)
{
    const CallPeriods &p = policy.periods;
    bool first = now_ms < p.first_end_ms;

    return {static_cast<std::int64_t>(first ? p.start_ms : p.first_end_ms),
            static_cast<std::int64_t>(first ? p.first_end_ms
                                            : p.second_end_ms)};
}

std::uint64_t calendar_first_end(const Policy &policy)
{
    return policy.periods.first_end_ms;
}

std::uint64_t calendar_second_end(const Policy &policy)
{
    return policy.periods.second_end_ms;
}

std::uint64_t calendar_window_s(const Policy &policy, std::uint64_t now_ms)
{
    Period period = counted_period(policy, now_ms);
    auto ms = static_cast<std::uint64_t>(period.end_ms - period.start_ms);

    return ms > 0 ? (ms + 999) / 1000 : 1;
}

ZoneStatus calendar_status(const Policy &policy, std::uint64_t total,
                           std::uint64_t, bool over, std::uint64_t now_ms)
{
    ZoneStatus status = window_status(policy, total, 0, over, now_ms);
    auto end = static_cast<std::uint64_t>(
        counted_period(policy, now_ms).end_ms);

    status.reset_ms = end > now_ms ? end - now_ms : 0;
    return status;
}

CountedBucket calendar_bucket_at(const Policy &policy, std::uint64_t now_ms)
{
    auto end = static_cast<std::uint64_t>(
        counted_period(policy, now_ms).end_ms);

    return {end - 1, end};
}

}  // namespace ratelimit
