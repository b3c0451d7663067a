// The shared memory of the rate zones' top subjects, one block in one
// zone "ratelimit_top_HASH" (HASH of the zones' names and capacities, so a
// reload that changes them gets new memory, and one that does not keeps
// the counts).  Each zone with `top=K` has, at Zone::top_offset, two
// slots, the time slices alternating between them (slice index % 2), each
// its slice, whether it is flushed, and two summaries of K counters: one
// ranked by requests, one by rejections.  What a zone takes:
// top_zone_size(K) bytes, 11 KB for K = 32, 352 KB for K = 1024.  One
// lock (the slab pool's) serves every zone: a request holds it for one
// scan of K counters per zone.
#pragma once

#include <string>

#include "conf/module_conf.hpp"
#include "top/top_script.hpp"

namespace ratelimit {

namespace top {

std::size_t top_zone_size(std::uint32_t capacity);

// Adds the shared memory if some rate zone keeps its top and Redis is
// configured; sets each zone's top_offset.  Called at postconfiguration.
ngx_int_t add_shared_zone(ngx_conf_t *cf, MainConf *mcf) noexcept;

// Counts a request's `subject` in `zone` at Unix second `now_s`: in both
// rankings' summaries of the current slice, `rejected` or not.
void record(ngx_shm_zone_t *shm, const Zone &zone, std::string_view subject,
            bool rejected, std::uint64_t now_s) noexcept;

// The slice before the one of `now_s`, if no worker took it yet and it
// counted anything: taken (marked flushed) and copied into *flush (its
// base not set).  False if there is none.  Throws std::bad_alloc.
bool take_finished(ngx_shm_zone_t *shm, const Zone &zone,
                   std::uint64_t now_s, TopFlush *flush);

}  // namespace top

}  // namespace ratelimit
