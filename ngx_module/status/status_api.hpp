// The content handler of a `ratelimit_query` location: each method to its
// own handler.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

// GET and HEAD report (status_handler.hpp), or with ?top= name the zone's
// top subjects (top_handler.hpp), DELETE forgives where
// delete=on (forgive_handler.hpp), PUT sets an override where override=on
// (override_handler.hpp); anything else is 405.
ngx_int_t status_api_handler(ngx_http_request_t *r) noexcept;

}  // namespace ratelimit
