// Zone policy: how many requests a window admits, and how the window is cut
// into buckets.  Pure arithmetic, shared by the directive parser and tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ratelimit {

// The most buckets a default window is cut into: the script's work and a
// subject's Redis memory grow with the number of live buckets.
constexpr std::uint64_t kMaxDefaultBuckets = 60;

struct Rate {
    std::uint64_t limit;      // requests admitted per window, > 0
    std::uint64_t window_ms;  // window length in milliseconds, > 0
};

// How a rate zone counts: a sliding window of buckets, a fixed window (one
// bucket, the window), GCRA as nginx's limit_req (a theoretical arrival
// time per subject; a request of the rate every window_ms / limit), or a
// fixed window whose windows are calendar periods (calendar_zone.hpp).
// Each is a row of kAlgorithms (algorithms.hpp).
enum class Algorithm { kSliding, kFixed, kGcra, kCalendar };

// Three boundaries of a calendar zone's periods, in Unix ms: the periods
// [start_ms, first_end_ms) and [first_end_ms, second_end_ms), two in a
// row, whose ends a call names (A and B: protocol/batch_protocol.hpp).
struct CallPeriods {
    std::uint64_t start_ms;
    std::uint64_t first_end_ms;
    std::uint64_t second_end_ms;
};

struct Policy {
    std::uint64_t limit;
    std::uint64_t window_ms;
    std::uint64_t bucket_ms;  // divides window_ms; a fixed, GCRA or
                              // calendar zone's is the window
    Algorithm algorithm = Algorithm::kSliding;
    // GCRA: the requests over the rate that may come at once (limit_req's
    // burst=), from the location that applies the zone.
    std::uint64_t burst = 0;
    // A calendar zone's periods as one call names them, made from nginx's
    // clock (calendar_zone.hpp), its window the period that clock is in;
    // zeros until made, and in other zones.
    CallPeriods periods{};

    // GCRA: the time one request of the rate takes, in microseconds; of a
    // subject given limit 0 (an override, whose requests all fail:
    // zone_status()), a window, so that no figure made of it is infinite.
    double emission_us() const
    {
        return static_cast<double>(window_ms) * 1000
               / static_cast<double>(limit > 0 ? limit : 1);
    }

    std::uint64_t buckets() const { return window_ms / bucket_ms; }
    std::uint64_t window_seconds() const { return (window_ms + 999) / 1000; }
};

// What a client is told of a zone: see AlgorithmRow::status.
struct ZoneStatus {
    std::uint64_t limit;      // what the headers call the limit
    std::uint64_t remaining;  // requests the zone still admits
    std::uint64_t reset_ms;   // until remaining grows
};

// The bucket a request decided at some Redis time was counted in: its
// number, as Redis names it (of a fixed window, the window's), and when it
// ends, in Unix ms.
struct CountedBucket {
    std::uint64_t number;
    std::uint64_t end_ms;
};

// "100r/s", "10r/m", "5r/h", "1r/d": N requests per second, minute, hour or
// day.  N must be a positive integer; anything else is nullopt.
std::optional<Rate> parse_rate(std::string_view text);

// The letter of a rate's window as parse_rate() reads it: 's', 'm', 'h' or
// 'd' for a second, a minute, an hour or a day; 'd' for any other.
char rate_unit(std::uint64_t window_ms);

// Positive decimal integer without sign or suffix, at most 2^53 so that the
// Redis script (Lua doubles) stores it exactly.
std::optional<std::uint64_t> parse_count(std::string_view text);

// The same from 0: units, as a request's cost or a settle's value.
std::optional<std::uint64_t> parse_units(std::string_view text);

// The limit one request gets in a zone whose `limit=` or `rate=` is a
// variable, from the variable's value: without `rate`, a count as limit=
// takes (1 to 2^53); with `rate`, a rate as rate= takes (Nr/s, Nr/m, Nr/h
// or Nr/d) turned into the requests it admits in the zone's window of
// `window_ms`, rounded down (10r/s in a window of 1 minute: 600).
// nullopt for anything else, and for a rate that admits less than one
// request, or more than 2^53, in the window.
std::optional<std::uint64_t> limit_from_value(std::string_view value,
                                              bool rate,
                                              std::uint64_t window_ms);

// Whether a `limit=$variable` or `rate=$variable` value is zero ("0", or
// "0r/s" and the like): the zone admits none of the request's subject.
bool blocks_all(std::string_view value, bool rate);

// The bucket length for a window when none is given: the window cut into the
// largest number of buckets, at most kMaxDefaultBuckets, that leaves each a
// whole number of milliseconds (60 s -> 1000 ms, 1 s -> 20 ms, 7 ms -> 1 ms).
std::uint64_t default_bucket_ms(std::uint64_t window_ms);

}  // namespace ratelimit
