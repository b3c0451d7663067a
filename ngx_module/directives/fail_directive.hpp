// `ratelimit_fail open | closed [status=N] | local [servers=N];` and
// `ratelimit_local_memory SIZE;`, the memory that `local` counts in.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

char *set_fail(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept;

// The post handler of `ratelimit_local_memory`: at least kMinLocalMemory.
extern ngx_conf_post_t local_memory_bounds;

constexpr size_t kDefaultLocalMemory = 4 * 1024 * 1024;
constexpr size_t kMinLocalMemory = 64 * 1024;

// The policy, its servers= and status= go together: a location that gives none
// inherits both.  Marks the main conf when a location applying zones
// fails local.
void merge_fail(ngx_conf_t *cf, LocConf *conf, const LocConf *prev) noexcept;

}  // namespace ratelimit
