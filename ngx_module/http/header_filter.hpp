// Adds the rate-limit headers to every response of a limited request.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

ngx_int_t install_header_filter(ngx_conf_t *cf) noexcept;

// Appends a header to r's response (common/ngx_glue.hpp's add_header())
// with `value` in decimal.
bool add_number(ngx_http_request_t *r, ngx_str_t name, std::uint64_t value);

}  // namespace ratelimit
