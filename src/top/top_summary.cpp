#include "top/top_summary.hpp"

#include <cstring>

namespace ratelimit {

namespace {

bool holds(const TopCounter &c, std::uint64_t hash, std::string_view key)
{
    return c.hash == hash && c.len == key.size()
           && std::memcmp(c.key, key.data(), key.size()) == 0;
}

// A counter's inherited count is what its subject's count may overstate.
void take(TopCounter *c, std::uint64_t hash, std::string_view key,
          std::uint64_t inherited)
{
    c->hash = hash;
    c->count = inherited;
    c->len = static_cast<std::uint8_t>(key.size());
    std::memcpy(c->key, key.data(), key.size());
}

}  // namespace

void top_init(TopSummary *summary, std::uint32_t capacity)
{
    summary->capacity = capacity;
    top_clear(summary);
}

void top_clear(TopSummary *summary)
{
    summary->used = 0;
    summary->total = 0;
    summary->replaced = 0;
}

TopCounter *top_counters(TopSummary *summary)
{
    return reinterpret_cast<TopCounter *>(summary + 1);
}

const TopCounter *top_counters(const TopSummary *summary)
{
    return reinterpret_cast<const TopCounter *>(summary + 1);
}

// A scan of at most `capacity` counters, the hash compared first: the
// summary is small (a few dozen counters by default), and a scan needs no
// index to keep in shared memory.
void top_count(TopSummary *summary, std::string_view key, std::uint64_t units)
{
    TopCounter *counters = top_counters(summary);
    std::uint64_t hash = top_key_hash(key);
    TopCounter *smallest = nullptr;

    summary->total += units;

    for (std::uint32_t i = 0; i < summary->used; i++) {
        TopCounter &c = counters[i];

        if (holds(c, hash, key)) {
            c.count += units;
            return;
        }

        if (smallest == nullptr || c.count < smallest->count) {
            smallest = &c;
        }
    }

    if (summary->used < summary->capacity) {
        smallest = &counters[summary->used++];
        take(smallest, hash, key, 0);
    } else {
        take(smallest, hash, key, smallest->count);
        summary->replaced = 1;
    }

    smallest->count += units;
}

std::uint64_t top_error(const TopSummary &summary)
{
    if (summary.replaced == 0) {
        return 0;
    }

    const TopCounter *counters = top_counters(&summary);
    std::uint64_t smallest = counters[0].count;

    for (std::uint32_t i = 1; i < summary.used; i++) {
        if (counters[i].count < smallest) {
            smallest = counters[i].count;
        }
    }

    return smallest;
}

std::uint64_t top_estimate(const TopSummary &summary, std::string_view key)
{
    const TopCounter *counters = top_counters(&summary);
    std::uint64_t hash = top_key_hash(key);

    for (std::uint32_t i = 0; i < summary.used; i++) {
        if (holds(counters[i], hash, key)) {
            return counters[i].count;
        }
    }

    return 0;
}

}  // namespace ratelimit
