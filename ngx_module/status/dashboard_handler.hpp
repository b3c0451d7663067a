// `ratelimit_dashboard`: the location answers with the page of
// report/dashboard_page.hpp, made once when the directive was read.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

// The content handler of a location with `ratelimit_dashboard`: GET and
// HEAD, else 405.
ngx_int_t dashboard_handler(ngx_http_request_t *r) noexcept;

}  // namespace ratelimit
