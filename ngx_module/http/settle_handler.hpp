// The log phase handler of `ratelimit_settle`: a main request's settles,
// once its response is out.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

// Adds the handler, if some location has `ratelimit_settle`.
ngx_int_t install_settle_handler(ngx_conf_t *cf) noexcept;

}  // namespace ratelimit
