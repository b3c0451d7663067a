// A space-saving summary (Metwally, Agrawal, El Abbadi, 2005) of the
// subjects of a stream: at most `capacity` counters, each a subject's
// stored form (top_key.hpp) with its count.  A
// subject counted is found and its counter raised; a new one takes a free
// counter, or, once all are taken, the smallest counter's place, its count
// one more than that counter's (the count it inherits is its error).
//
// What it guarantees, for any subject s of a stream of n counted units:
// - a counter's count never underestimates its subject's true count, and
//   overestimates it by at most the count it inherited, which is at most
//   top_error() <= n / capacity;
// - a subject with no counter counted at most top_error();
// - while no counter was ever replaced (at most `capacity` subjects), every
//   count is exact and top_error() is 0.
// So every subject's estimate (its count, or 0 without a counter) is within
// top_error() of its true count.
//
// The summary is plain memory: a TopSummary header then `capacity`
// TopCounter, made by top_init() in top_summary_size() bytes (nginx shared
// memory; no pointer, so any process may map it anywhere).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "top/top_key.hpp"

namespace ratelimit {

struct TopCounter {
    std::uint64_t hash;     // top_key_hash() of the key: compared first
    std::uint64_t count;    // units counted, the inherited error included
    std::uint8_t len;       // of key, at most kTopKeyBytes
    char key[kTopKeyBytes]; // the subject's stored form
};

struct TopSummary {
    std::uint32_t capacity; // counters, kTopMinCapacity..kTopMaxCapacity
    std::uint32_t used;     // counters taken, from the first
    std::uint64_t total;    // units counted: the stream's n, exact
    std::uint64_t replaced; // some counter changed subject: not exact
    // then `capacity` TopCounter
};

constexpr std::uint32_t kTopMinCapacity = 8;
constexpr std::uint32_t kTopMaxCapacity = 1024;

constexpr std::size_t top_summary_size(std::uint32_t capacity)
{
    return sizeof(TopSummary) + capacity * sizeof(TopCounter);
}

// An empty summary of `capacity` counters in top_summary_size() bytes,
// suitably aligned for TopSummary.
void top_init(TopSummary *summary, std::uint32_t capacity);

// Empties it, keeping its capacity.
void top_clear(TopSummary *summary);

TopCounter *top_counters(TopSummary *summary);
const TopCounter *top_counters(const TopSummary *summary);

// Counts `units` of the subject whose stored form is `key` (write_top_key():
// at most kTopKeyBytes bytes).
void top_count(TopSummary *summary, std::string_view key,
               std::uint64_t units = 1);

// The bound on every estimate's error: the smallest count once a counter
// changed subject, 0 before (every count exact).
std::uint64_t top_error(const TopSummary &summary);

// The count of `key`, 0 if it has no counter.
std::uint64_t top_estimate(const TopSummary &summary, std::string_view key);

}  // namespace ratelimit
