// The shared memory `ratelimit_fail local` counts in: one zone per server
// (all its workers), added when some location applying zones fails local,
// of `ratelimit_local_memory` bytes.  A red-black tree of subjects, keyed
// by their Redis key (which names the zone and the subject, a long one by
// its SHA-1, so that a reload that reorders zones keeps each count), and
// the least recently used subjects evicted when it is full: no request
// fails for want of memory.  The live servers learnt from Redis are kept
// beside them.
#pragma once

#include <string_view>

#include "conf/module_conf.hpp"
#include "limits/local_share.hpp"

namespace ratelimit {

namespace local {

// After the http block is read: adds the zone if mcf->local.
ngx_int_t add_shared_zone(ngx_conf_t *cf, MainConf *mcf) noexcept;

// One zone of a request decided locally: `share` units per window of
// `window_ms`, `cost` asked; `status` is filled in.
struct LocalAsk {
    std::string_view key;
    std::uint64_t share;
    std::uint64_t window_ms;
    std::uint64_t cost;
    bool enforced;          // not a dry run: may reject
    LocalStatus status;
};

// Under the zone's lock, at now_ms (wall clock): each ask's status; if
// every enforced ask fits, the cost is counted in every ask's zone, and
// true is returned.
bool count_locally(ngx_shm_zone_t *zone, LocalAsk *asks, ngx_uint_t n,
                   std::uint64_t now_ms) noexcept;

// The live servers of the fleet as a worker last learnt them from Redis;
// 0 until one has.
ngx_uint_t live_servers(ngx_shm_zone_t *zone) noexcept;
void store_live_servers(ngx_shm_zone_t *zone, ngx_uint_t servers) noexcept;

}  // namespace local

}  // namespace ratelimit
