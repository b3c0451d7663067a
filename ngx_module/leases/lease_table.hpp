// A rate zone's leases on this server (`lease=SIZE`): one LeaseState per
// subject (leases/lease_ledger.hpp), in a shared memory zone of that size
// that every worker of the server uses under its lock, keyed by the
// subject's Redis key.  When the zone is full the least recently used
// subject is evicted: what its lease held goes back to Redis.
#pragma once

#include <string_view>

#include "conf/module_conf.hpp"
#include "leases/lease_ledger.hpp"

namespace ratelimit {

struct LeaseTable;

// Adds the shared memory of `zone`'s leases: `bytes` of it.
ngx_int_t add_lease_table(ngx_conf_t *cf, Zone *zone,
                          std::uint64_t bytes) noexcept;

// A subject's units given back: a settle of -units into `bucket`.
struct LeaseGiveBack {
    ngx_str_t key;   // in the caller's pool
    LeaseReturn units;
};

// The table locked for one subject's ledger; unlocked when it goes.
class LeaseEntry {
public:
    // Finds the subject's entry, or makes one (evicting the least recently
    // used subjects if there is no room: *evicted, made in `pool`, lists a
    // LeaseGiveBack for each that held units, keys in `pool`; nullptr if
    // none).  Not found and not made: state() is nullptr.
    LeaseEntry(LeaseTable *table, std::string_view key, ngx_pool_t *pool,
               ngx_array_t **evicted) noexcept;
    // Finds it only.
    LeaseEntry(LeaseTable *table, std::string_view key) noexcept;
    ~LeaseEntry();

    LeaseEntry(const LeaseEntry &) = delete;
    LeaseEntry &operator=(const LeaseEntry &) = delete;

    LeaseState *state() const { return state_; }

private:
    LeaseTable *table_;      // locked from construction to destruction
    LeaseState *state_ = nullptr;
};

// Gives back, oldest first, the units of the table's leases that died or
// went quiet by `now_ms` (LeaseLedger::expire()), at most `max` of them
// into `out` (keys in `pool`), and forgets subjects that hold nothing and
// have been quiet for idle_ms.  Returns how many it wrote.
ngx_uint_t sweep_lease_table(LeaseTable *table, const LeaseParams &params,
                             std::uint64_t now_ms, ngx_pool_t *pool,
                             LeaseGiveBack *out, ngx_uint_t max) noexcept;

}  // namespace ratelimit
