// The rules of the windows, as pure arithmetic on bucket numbers: one
// definition for the nginx module (SlidingWindow, the status API) and the
// Redis module's command.  The window script (scripts/lua/) states the
// same rules in Lua and t/19 holds all three to them.
//
// `N` is the number type of the caller: unsigned milliseconds in nginx; in
// the Redis module a double, as the script's Lua numbers are, so that a
// hash an operator filled with fractions is decided as the script decides
// it.  Integers below 2^53 are exact either way.
#pragma once

#include <cmath>
#include <cstdint>

namespace ratelimit::window_rules {

// The largest limit and window of a zone.  A limit above 2^53 has no exact
// double.  A window of at most a million weeks keeps a key's expiry time,
// about now + window, an exact double and a time Redis takes: larger ones
// made it infinite or past 2^63 ms, which both Redis sides turned into a
// key that never expires or one deleted as soon as written.
constexpr std::uint64_t kMaxLimit = std::uint64_t{1} << 53;
constexpr std::uint64_t kMaxWindowMs = std::uint64_t{1000000} * 7 * 24
                                       * 60 * 60 * 1000;

// The latest end of a calendar zone's period that nginx sends, in Unix ms:
// an exact double, and a key's expiry time Redis takes.
constexpr std::uint64_t kMaxPeriodEndMs = std::uint64_t{1} << 53;

// Whether `x`, a double, is a whole number from 1 to `most`: NaN and
// infinities are not.
inline bool whole(double x, double most)
{
    return x >= 1 && x <= most && x == std::floor(x);
}

// A zone's limit, bucket length (ms) and buckets per window as the Redis
// side reads them, doubles: what nginx sends, whole numbers from 1, the
// limit and the window (bucket * span) no larger than the above.  NaN and
// infinities are not.  A zone of side mode (`side`: its subjects may hold
// an override) may also have limit 0, which admits a subject only under
// its override.  (A calendar zone's bucket and span are 1: its period
// ends, calendar_ends_valid().)
inline bool zone_numbers_valid(double limit, double bucket_ms, double span,
                               bool side)
{
    return (whole(limit, static_cast<double>(kMaxLimit))
            || (side && limit == 0))
           && whole(bucket_ms, static_cast<double>(kMaxWindowMs))
           && whole(span, static_cast<double>(kMaxWindowMs))
           && bucket_ms * span <= static_cast<double>(kMaxWindowMs);
}

// A calendar zone's two period ends A < B in Unix ms, in place of its
// bucket length and span, as the Redis side reads them: whole numbers from
// 1, B at most kMaxPeriodEndMs.
inline bool calendar_ends_valid(double a, double b)
{
    return whole(a, static_cast<double>(kMaxPeriodEndMs))
           && whole(b, static_cast<double>(kMaxPeriodEndMs)) && a < b;
}

// The end (Unix ms) of the period a calendar zone of ends `a` < `b` counts
// in at Redis time `now_ms`: the one ending at A while the clock is before
// A, else the one ending at B; 0 (none) once the clock is past B, which
// refuses the call (nginx's clock half a period away from Redis's).  The
// zone is then a fixed window of 1 ms buckets and span 1 whose bucket is
// the period's last ms, end - 1: its key expires at the period's end.
template <typename N>
constexpr N calendar_end(N now_ms, N a, N b)
{
    return now_ms < a ? a : now_ms < b ? b : 0;
}

// The oldest bucket of a window of `span` buckets whose newest is `current`.
template <typename N>
constexpr N first_bucket(N current, N span)
{
    return current - span + 1;
}

// When the counts of a window whose newest bucket is `newest` all leave it:
// the key's expiry time, in ms.
template <typename N>
constexpr N expiry_ms(N newest, N span, N bucket_ms)
{
    return (newest + span) * bucket_ms;
}

// The bucket a request is counted in when the key's newest bucket is
// `newest`: that one if Redis's clock stepped back since it was written by
// at most a window (a failover to a replica, an NTP step), so that counts
// made "in the future" still count; else the current one.  A larger gap
// means a key written under another bucket length, started afresh.
template <typename N>
constexpr bool clock_stepped_back(N current, N newest, N span)
{
    return newest > current && newest - current <= span;
}

// An interval of the status API sums the buckets numbered above this: the
// `wanted` newest, `counted_in` the bucket a request would be counted in.
template <typename N>
constexpr N interval_floor(N counted_in, N wanted)
{
    return counted_in - wanted;
}

// Buckets summed for an interval of `interval_ms`: rounded up, so that no
// request of the interval is left out.
template <typename N>
constexpr N interval_buckets(N interval_ms, N bucket_ms)
{
    return (interval_ms + bucket_ms - 1) / bucket_ms;
}

}  // namespace ratelimit::window_rules
