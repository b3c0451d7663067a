// `ratelimit_zone NAME key=VALUE concurrency=N [queue=M]
// [queue_timeout=TIME] [lease=TIME];`: a zone that bounds the requests of a
// subject in flight, not their rate.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

// Whether the directive being read has `concurrency=`.
bool is_concurrency_zone(ngx_conf_t *cf) noexcept;

// Reads the directive's parameters into zone->concurrency and *key (the
// `key=` value, unchecked).  NGX_CONF_OK, or the error, logged.
char *parse_concurrency_zone(ngx_conf_t *cf, Zone *zone,
                             ngx_str_t *key) noexcept;

// A location puts requests under one concurrency zone at most: a request
// waits in one queue, never in one while holding a slot of another.  (The
// status API, `ratelimit_query`, may report on any number of them.)
bool check_concurrency_refs(ngx_conf_t *cf, ngx_array_t *refs) noexcept;

}  // namespace ratelimit
