// A lease's renewal (leases/): a call of no request that asks Redis to
// count units of a subject for this server's lease, sent in the next batch
// of the key's connection as a settle is.  The worker's batcher owns each
// from CallBatcher::renew_lease() until end_renewal() tells its owner how
// it ended; a renewal never waits for the link (its lease would be stale)
// and is never resent once it may have reached Redis.
#pragma once

#include <string>

#include "conf/module_conf.hpp"
#include "replies/reply.hpp"
#include "scripts/script_batch.hpp"
#include "scripts/window_script.hpp"

namespace ratelimit {

// What Redis counted for a lease's renewal: `units` in the bucket of its
// time `now_ms`, after which the fleet's count in the window is `count`,
// under the subject's `override` (none: not set).
struct LeaseGrant {
    std::uint64_t units;
    std::uint64_t count;
    std::uint64_t now_ms;
    Override override;
};

struct LeaseRenewal;

// Told the fate of a lease's renewal: its grant, or nullptr if it failed
// or its outcome is unknown (what Redis may have counted is lost).
using LeaseRenewed = void (*)(const LeaseRenewal &renewal,
                              const LeaseGrant *grant) noexcept;

struct LeaseRenewal {
    std::string key;
    std::string zone_args;  // write_zone_args() of the zone
    std::uint64_t made_ms;  // when zone_args were made, on nginx's wall
                            // clock: of a calendar zone, the periods of
                            // that instant (policy_at())
    std::uint64_t asked;    // units asked, > 0
    const Zone *zone;
    std::uint16_t slot;     // of the key, in a cluster
    LeaseRenewed renewed;
};

// A renewal of `asked` units of `key` in `zone`, whose arguments were
// made at made_ms; nullptr on no memory, `renewed` told so at once.
LeaseRenewal *make_renewal(std::string_view key, std::string_view zone_args,
                           std::uint64_t made_ms, std::uint64_t asked,
                           const Zone &zone, LeaseRenewed renewed) noexcept;

// Adds the renewal's entry to `call`, of its zone's `side` keys; false,
// with the call as it was, on no memory.
bool add_renewal(ScriptBatch *call, const LeaseRenewal &renewal,
                 ZoneSide side) noexcept;

// The renewal's reply, from `reply` on in its batch's, with the override
// the batch's tail tells of it (told_of()), and the batch's Redis time:
// its owner is told, and the renewal freed.
void take_renewal_reply(LeaseRenewal *renewal, std::uint64_t now_ms,
                        const Reply *reply, Told told) noexcept;

// Tells the renewal's owner its grant (nullptr: it failed, or its outcome
// is unknown) and frees it.
void end_renewal(LeaseRenewal *renewal, const LeaseGrant *grant) noexcept;

}  // namespace ratelimit
