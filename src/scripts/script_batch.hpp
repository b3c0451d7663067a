// The requests a worker sends Redis in one call of the window script,
// encoded in Redis's protocol (RESP) as they are added: sending a batch
// copies bytes and formats nothing, and one script call, one TIME and one
// round of parsing serve every request in it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "limits/policy.hpp"
#include "protocol/batch_protocol.hpp"
#include "scripts/window_script.hpp"

namespace ratelimit {

// The arguments of a zone that do not depend on the request (limit, bucket
// length in ms, buckets per window, algorithm; of a GCRA zone, its limit,
// window, capacity 1 + burst and algorithm; of a calendar zone, its limit,
// its call's period ends A and B, and algorithm), as RESP bulk strings: at
// most kZoneArgsMaxSize bytes, a bulk of at most 20 digits for each
// argument but the last (whether the zone is enforced, which the batch
// adds).
constexpr std::size_t kZoneArgsMaxSize = (kArgsPerZone - 1)
                                         * (1 + 20 + 2 + 20 + 2);
std::size_t write_zone_args(const Policy &policy, char *out);

// A zone's side keys (issue 41; see window_script.hpp), for a zone whose
// subjects may hold overrides or bans: the base of its side keys, and
// what follows the base in its marker key of the batch's slot
// (keys/subject_key.hpp); and of a zone that bans (issue 43), the ban's
// length in ms, 1 to kMaxWindowMs (limits/window_rules.hpp), else 0.
// Empty for other zones.  A dry-run zone never bans: its ban_ms is not
// sent (it is described as a side zone without).
struct ZoneSide {
    std::string_view base;
    std::string_view marker_tail;
    std::uint64_t ban_ms = 0;
};

class ScriptBatch {
public:
    // Adds a request deciding `zones` zones (1 to kMaxZonesPerRequest):
    // keys[i] is its Redis key in zone i, zone_args[i] what
    // write_zone_args() wrote for that zone, enforce[i] false to dry-run
    // it.  `peek` reports on the zones and counts nothing; with
    // `interval_buckets` too (else nullptr), an interval peek also asks for
    // the count of the interval_buckets[i] newest buckets of zone i (1 to
    // the zone's buckets per window).  A zone's arguments go once into the
    // batch, however many requests use it: two zones are the same if their
    // zone_args hold the same bytes and they are enforced alike, so that
    // requests a zone gives different limits (a limit from a variable) are
    // decided under each their own, and requests given the same limit share
    // one.  zone_args need not outlive the call: the batch compares with
    // its own copy.  False, with the batch as it was, on no memory, past
    // kMaxZoneDescriptors distinct zones, or for interval buckets without
    // `peek`.  `costs`, if not nullptr, holds the request's cost in each
    // zone, 0 to kMaxCost (a zone's cost is 1 without it).  `sides`, if not
    // nullptr, holds each zone's side keys: a zone with a base is of side
    // mode, described apart from one of the same arguments without.
    bool add(bool peek, std::size_t zones, const std::string_view *keys,
             const std::string_view *zone_args, const bool *enforce,
             const std::uint64_t *interval_buckets = nullptr,
             const std::uint64_t *costs = nullptr,
             const ZoneSide *sides = nullptr) noexcept;

    // Adds a settle: `units` (of magnitude at most kMaxCost) added to
    // bucket `bucket` of `key`, a zone whose arguments are `zone_args`
    // (see window_script.hpp).  Its reply is that of a request in one
    // zone.  False, with the batch as it was, as for add().
    bool add_settle(std::string_view key, std::string_view zone_args,
                    std::int64_t units, std::uint64_t bucket,
                    ZoneSide side = {}) noexcept;

    // Adds a lease: `units` (at most kMaxCost) asked of `key`, a zone
    // whose arguments are `zone_args`, enforced, of a sliding or fixed
    // window (see window_script.hpp).  Its reply, 5 elements, is for
    // decode_lease_reply().  False, with the batch as it was, as for add().
    bool add_lease(std::string_view key, std::string_view zone_args,
                   std::uint64_t units, ZoneSide side = {}) noexcept;

    // The largest cost the script takes: a Lua number holds every whole
    // number up to it.
    static constexpr std::uint64_t kMaxCost = std::uint64_t{1} << 53;

    std::size_t entries() const noexcept { return requests_; }

    // Some zone of the batch is of side mode: its reply may tell of
    // overrides (see window_script.hpp).
    bool sided() const noexcept { return side_zones_ > 0; }

    // A request in `zones` zones fits, however many of them are new to the
    // batch.
    bool has_room(std::size_t zones) const noexcept
    {
        return described_.size() + zones <= kMaxZoneDescriptors;
    }

    // The length of the script's reply to this batch before its tail of
    // overrides, and where in it request `entry`'s reply starts (see
    // window_script.hpp).
    std::size_t reply_elements() const noexcept
    {
        return 1 + requests_ + kRepliesPerZone * key_count_
               + extra_elements_;
    }

    std::size_t reply_offset(std::size_t entry) const noexcept
    {
        return reply_offsets_[entry];
    }

    // How the batch is sent: the script by its digest (EVALSHA) or its
    // text (EVAL), or the Redis module's command (see decide_command.hpp).
    enum class Form { kEvalSha, kEval, kDecideCommand };

    // Writes the whole command into `out`; with `cross_slot`, of
    // cross_slot_script(), its keys in ARGV (a script form only: the
    // command declares its keys).  `packed`: the window zones' new keys
    // are packed strings, else hashes (the letter after the number of
    // zones, which a Redis module of the release before refuses).  Its
    // side zones' markers go last in the keys (the letter's marked form)
    // but with `cross_slot`, whose keys span slots.  False on no memory.
    bool write_command(Form form, std::string *out, bool cross_slot,
                       bool packed) const noexcept;

    void clear() noexcept;

    // Zones one batch can name: a request names each of its zones by one
    // byte.
    static constexpr std::size_t kMaxZoneDescriptors = 256;

private:
    // RESP bulks: the keys, the zones' arguments, one entry per request,
    // the side zones' markers.
    std::string keys_;
    std::string zones_;
    std::string entries_;
    std::string markers_;
    // A zone of the batch: its write_zone_args() bytes in zones_, of a
    // side zone its base's (in its mode's bulk), and the ban it sends.
    struct Descriptor {
        std::size_t at;
        std::size_t size;
        bool enforce;
        std::size_t base_at;
        std::size_t base_size;
        std::uint64_t ban_ms;
    };

    bool described_as(const Descriptor &d, std::string_view args,
                      bool enforce, ZoneSide side) const noexcept;
    void describe(std::string_view args, bool enforce, ZoneSide side);
    bool add_entry(std::string_view head, std::size_t zones,
                   const std::string_view *keys,
                   const std::string_view *zone_args, const bool *enforce,
                   const ZoneSide *sides,
                   std::size_t extra_elements) noexcept;

    std::vector<Descriptor> described_;
    std::vector<std::size_t> reply_offsets_;
    std::size_t requests_ = 0;
    std::size_t key_count_ = 0;
    std::size_t side_zones_ = 0;
    // Reply elements past a request's 1 + kRepliesPerZone per zone: the
    // interval peeks' counts, one per zone, and the leases' grants.
    std::size_t extra_elements_ = 0;
};

}  // namespace ratelimit
