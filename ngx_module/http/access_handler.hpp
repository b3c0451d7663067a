// The preaccess phase handler: sends the request's zones to Redis, suspends
// the request until the verdict (or the timeout), then lets it pass or
// answers it.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

ngx_int_t preaccess_handler(ngx_http_request_t *r) noexcept;

}  // namespace ratelimit
