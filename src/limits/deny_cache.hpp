// A worker's memory of the subjects Redis has just rejected.
//
// Redis rejects a request when the zone's count is at its limit L already.
// That count can only fall as its oldest counts leave the window (a
// rejected request is not counted; a request admitted meanwhile, by any
// server, only adds to it), so until the reset t that Redis gave (when the
// oldest count leaves) the count stays at L or above, and every request
// whose limit is L or less is rejected, whatever any server does
// meanwhile.  Answering those requests locally is exact, and spares Redis
// a flood of calls whose answer is known.
//
// A zone whose limit is a variable gives each request its own limit, so an
// entry holds the limit it was rejected at and answers only requests whose
// limit is no higher: a subject rejected at 5 whose next request carries
// 100 (its plan was raised) asks Redis.  Keying entries by limit instead
// would ask Redis again for a lower limit, whose answer is known; leaving
// variable limits out would lose the flood's savings for them.
//
// Fixed memory: a direct-mapped table of kSlots entries.  A collision just
// replaces the older entry, which costs one more Redis call, never a wrong
// answer: an entry is used only for the exact key it was made for.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace ratelimit {

class DenyCache {
public:
    static constexpr std::size_t kSlots = 4096;
    // Longer keys are not cached; hashed subjects make keys of at most
    // prefix + zone + 41 bytes.
    static constexpr std::size_t kMaxKey = 118;

    // Milliseconds a request of `key` under `limit` stays rejected after
    // now_ms; 0 if not known to be.  When it is, *reset_epoch_s (if given)
    // is the Unix time, in seconds, that Redis gave as the rejection's
    // reset: answered again as it was, not recomputed from this worker's
    // clock, which rounds differently.
    std::uint64_t denied_for(std::string_view key, std::uint64_t limit,
                             std::uint64_t now_ms,
                             std::uint64_t *reset_epoch_s = nullptr) const;

    // A request of `key` under `limit` was rejected: requests under that
    // limit or a lower one stay so until until_ms (this worker's monotonic
    // clock); Redis said it resets at reset_epoch_s.
    void deny(std::string_view key, std::uint64_t limit,
              std::uint64_t until_ms, std::uint64_t reset_epoch_s = 0);

private:
    struct Slot {
        std::uint64_t until_ms = 0;
        std::uint64_t limit = 0;
        std::uint64_t reset_epoch_s = 0;
        std::uint8_t len = 0;
        char key[kMaxKey];
    };

    static std::size_t slot_of(std::string_view key);

    std::array<Slot, kSlots> slots_;
};

}  // namespace ratelimit
