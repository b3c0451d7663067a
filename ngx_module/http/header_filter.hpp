// Adds the rate-limit headers to every response of a limited request.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

ngx_int_t install_header_filter(ngx_conf_t *cf) noexcept;

}  // namespace ratelimit
