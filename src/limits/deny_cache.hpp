// A worker's memory of the subjects Redis has just rejected.
//
// A zone's count can only fall as time passes (a rejected request is not
// counted, and nothing else can raise a count past the limit), so a subject
// rejected with reset t stays rejected until t has passed, whatever any
// server does meanwhile.  Answering those requests locally is exact, and
// spares Redis a flood of calls whose answer is known.
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

    // Milliseconds `key` stays rejected after now_ms; 0 if not known to be.
    // When it is, *reset_epoch_s (if given) is the Unix time, in seconds,
    // that Redis gave as the rejection's reset: answered again as it was,
    // not recomputed from this worker's clock, which rounds differently.
    std::uint64_t denied_for(std::string_view key, std::uint64_t now_ms,
                             std::uint64_t *reset_epoch_s = nullptr) const;

    // `key` was rejected and stays so until until_ms (this worker's
    // monotonic clock); Redis said it resets at reset_epoch_s.
    void deny(std::string_view key, std::uint64_t until_ms,
              std::uint64_t reset_epoch_s = 0);

private:
    struct Slot {
        std::uint64_t until_ms = 0;
        std::uint64_t reset_epoch_s = 0;
        std::uint8_t len = 0;
        char key[kMaxKey];
    };

    static std::size_t slot_of(std::string_view key);

    std::array<Slot, kSlots> slots_;
};

}  // namespace ratelimit
