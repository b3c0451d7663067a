// Adds the rate-limit headers to every response of a limited request.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

ngx_int_t install_header_filter(ngx_conf_t *cf) noexcept;

// Appends a header to r's response; false on no memory.  `name` and
// `value` must live as long as the request.
bool add_header(ngx_http_request_t *r, ngx_str_t name, ngx_str_t value);

// The same with `value` in decimal.
bool add_number(ngx_http_request_t *r, ngx_str_t name, std::uint64_t value);

}  // namespace ratelimit
