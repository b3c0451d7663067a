// Concurrency zones (`ratelimit_zone NAME key=VALUE concurrency=N ...`,
// read by parse_zone_params()) in the locations that apply them.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

// A location puts requests under one concurrency zone at most: a request
// waits in one queue, never in one while holding a slot of another.  (The
// status API, `ratelimit_query`, may report on any number of them.)
// NGX_CONF_OK, or the error, logged.
char *check_concurrency_refs(ngx_conf_t *cf, ngx_array_t *refs) noexcept;

}  // namespace ratelimit
