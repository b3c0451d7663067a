// A worker's memory of the subjects Redis has just rejected.
//
// Redis rejects a request of limit L and cost c when the zone's count is
// above its room R = L - max(c, 1) already.  That count can only fall as
// its oldest counts leave the window (a rejected request is not counted; a
// request admitted meanwhile, by any server, only adds to it; a zone whose
// settles may give units back is never remembered), so until the reset t
// that Redis gave (when the oldest count leaves) the count stays above R,
// and every request whose room is R or less is rejected, whatever any
// server does meanwhile.  Answering those requests locally is exact, and
// spares Redis a flood of calls whose answer is known.
//
// A zone whose limit or cost is a variable gives each request its own
// room, so an entry holds the room it was rejected at and answers only
// requests whose room is no larger: a subject rejected at limit 5 whose
// next request carries 100 (its plan was raised), or costs less, asks
// Redis.  Keying entries by room instead would ask Redis again for a
// smaller room, whose answer is known; leaving variable limits and costs
// out would lose the flood's savings for them.
//
// A subject forgiven, or its override changed, is forgotten
// (rate/forgive_listener.hpp): its rejection no longer holds.  But a call
// sent before that, which Redis rejected before the DELETE or PUT ran, may
// bring its reply after: on the data link, while the forgiving's message
// came on the subscriber's connection, or after the handler of this
// worker forgot the key at once.  Remembered then, that rejection would be
// answered from memory until its reset, under a limit no longer there.
// So forgetting leaves a tombstone in the key's slot, the key and the time
// it was forgotten, and a rejection is remembered only from a call sent
// after it.  A call sent in the same millisecond counts as sent before:
// the clock is nginx's cached one, which does not tell their order, and
// the cost of the doubt is one Redis call.  A tombstone answers nothing.
// It goes as any entry does: replaced by a rejection of another key in its
// slot.  Only then may a late reply bring back a lifted rejection: a
// collision within a reply's flight.  clear(), when forgivings may have
// been missed, forgets every key at once: no rejection of a call sent
// until then is remembered.
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

    // The room of a request of `cost` units under `limit`: the count above
    // which it does not fit.
    static constexpr std::int64_t room(std::uint64_t limit,
                                       std::uint64_t cost)
    {
        return static_cast<std::int64_t>(limit)
               - static_cast<std::int64_t>(cost > 0 ? cost : 1);
    }

    // The room of a ban (issue 43): every request of the key is refused
    // until the ban's end, whatever its cost or limit; no rejection by a
    // limit has it (limits are at most 2^53).  Asked with this room, only
    // a ban answers.
    static constexpr std::int64_t kBanRoom = INT64_MAX;

    // The quota of a rejection that was given none.
    static constexpr std::uint64_t kNoQuota = UINT64_MAX;

    // Milliseconds a request of `key` with `room` stays rejected after
    // now_ms; 0 if not known to be.  When it is, *reset_epoch_s (if given)
    // is the Unix time, in seconds, that Redis gave as the rejection's
    // reset: answered again as it was, not recomputed from this worker's
    // clock, which rounds differently; *quota (if given) the quota it
    // was rejected under, or kNoQuota; and *banned (if given) whether it
    // is a ban (room kBanRoom).
    std::uint64_t denied_for(std::string_view key, std::int64_t room,
                             std::uint64_t now_ms,
                             std::uint64_t *reset_epoch_s = nullptr,
                             std::uint64_t *quota = nullptr,
                             bool *banned = nullptr) const;

    // A request of `key` with `room` was rejected by a call sent at
    // sent_ms: requests with that room or less stay so until until_ms
    // (both on this worker's monotonic clock), unless the key was
    // forgotten at sent_ms or later, when this is ignored.  Redis said it
    // resets at reset_epoch_s; `quota`, if not kNoQuota, is the limit
    // every request of the key is answered with (a subject's override's,
    // whatever limit the request sends, from which its room is made).
    void deny(std::string_view key, std::int64_t room,
              std::uint64_t sent_ms, std::uint64_t until_ms,
              std::uint64_t reset_epoch_s = 0,
              std::uint64_t quota = kNoQuota);

    // The subject of `key` was forgiven (its count deleted) or its
    // override changed, at now_ms (the clock of deny()): its rejection, if
    // remembered, no longer holds, nor that of a call sent until now_ms.
    void forget(std::string_view key, std::uint64_t now_ms);

    // Every key forgotten at now_ms: forgivings may have been missed.
    // With `keep_bans`, the bans remembered stay (the forgive channel was
    // lost, most often with Redis: no ban can be lifted while Redis is
    // down, and a worker that knows one refuses until its end; a lift
    // missed meanwhile holds until the channel is back, when clear()
    // forgets them too).
    void clear(std::uint64_t now_ms, bool keep_bans = false);

private:
    // A rejection while until_ms is ahead; a tombstone once `forgotten`
    // (until_ms 0), and after that a rejection of a call sent after
    // forgotten_ms, while it holds the same key.
    struct Slot {
        std::uint64_t until_ms = 0;
        std::int64_t room = 0;
        std::uint64_t reset_epoch_s = 0;
        std::uint64_t quota = kNoQuota;
        std::uint64_t forgotten_ms = 0;  // when `key` was, if `forgotten`
        std::uint8_t len = 0;
        bool forgotten = false;
        char key[kMaxKey];
    };

    static std::size_t slot_of(std::string_view key);
    static bool holds(const Slot &slot, std::string_view key);
    static void put_key(Slot *slot, std::string_view key);

    // No entry is live at or after this time (ms, the entries' clock): the
    // latest until_ms given to deny() since clear().  Most requests come
    // when nothing is remembered, and are answered from this one word
    // without hashing their key or touching the half-megabyte table.
    std::uint64_t live_until_ms_ = 0;
    // No rejection of a call sent before this time is remembered: just
    // after the last clear() (its time + 1 ms; as with a tombstone, a call
    // of the same millisecond counts as sent before).
    std::uint64_t remembered_from_ms_ = 0;
    std::array<Slot, kSlots> slots_;
};

}  // namespace ratelimit
