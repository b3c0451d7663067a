// $ratelimit_status, $ratelimit_limit, $ratelimit_remaining, $ratelimit_reset.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

ngx_int_t add_variables(ngx_conf_t *cf) noexcept;

}  // namespace ratelimit
