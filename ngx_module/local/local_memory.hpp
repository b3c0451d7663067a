// The shared memory `ratelimit_fail local` counts in: one zone per server
// (all its workers), added when some location applying zones fails local,
// of `ratelimit_local_memory` bytes.  A red-black tree of subjects, keyed
// by their Redis key (which names the zone and the subject, a long one by
// its SHA-1, so that a reload that reorders zones keeps each count), and
// the least recently used subjects evicted when it is full (those whose
// share is used up last: see take_count()): no request fails for want of
// memory.  The live servers learnt from Redis are kept beside them.
#pragma once

#include <string_view>

#include "conf/module_conf.hpp"
#include "limits/local_share.hpp"

namespace ratelimit {

namespace local {

// After the http block is read: adds the zone if mcf->local.
ngx_int_t add_shared_zone(ngx_conf_t *cf, MainConf *mcf) noexcept;

// One zone of a request decided locally: the zone's `limit`, shared among
// `servers`, in the window that ends at window_end_ms (wall clock),
// `cost` asked; `share` (this server's of the limit, or of the subject's
// override) and `status` are filled in.
struct LocalAsk {
    std::string_view key;
    std::uint64_t limit;
    ngx_uint_t servers;
    std::uint64_t window_end_ms;
    std::uint64_t cost;
    bool enforced;          // not a dry run: may reject
    std::uint64_t share;
    LocalStatus status;
};

// Under the zone's lock, at now_ms (wall clock): each ask's status; if
// every enforced ask fits, the cost is counted in every ask's zone, and
// true is returned.
bool count_locally(ngx_shm_zone_t *zone, LocalAsk *asks, ngx_uint_t n,
                   std::uint64_t now_ms) noexcept;

// Redis told at now_ms (wall clock) of `key`'s subject's override, of
// `limit` in the zone's window, lapsing `left_ms` later (0: never): kept
// beside its count, to share out while Redis cannot be reached.  Only a
// set one is noted: one removed or changed is forgotten as its forgiving
// comes (rate/forgive_listener.hpp), all of them when forgivings may have
// been missed.
void note_override(ngx_shm_zone_t *zone, std::string_view key,
                   std::uint64_t limit, std::uint64_t left_ms,
                   std::uint64_t now_ms) noexcept;
void forget_override(ngx_shm_zone_t *zone, std::string_view key) noexcept;
void forget_overrides(ngx_shm_zone_t *zone) noexcept;

// The live servers of the fleet as the workers learnt them from Redis; 0
// until one has.
ngx_uint_t live_servers(ngx_shm_zone_t *zone) noexcept;

// A worker counted `counted` (> 0) live servers at now_ms.  A count that
// rises is taken at once; one that falls only once the counts have stayed
// below the one in use for kServerTtlMs, in which every live server has
// announced itself again: after Redis restarts empty, servers come back
// one by one, and none is counted out meanwhile.
void learn_live_servers(ngx_shm_zone_t *zone, ngx_uint_t counted,
                        std::uint64_t now_ms) noexcept;

}  // namespace local

}  // namespace ratelimit
