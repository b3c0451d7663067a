// The status API's `?zone=NAME&top=N`: the fleet's top N subjects of a
// rate zone that keeps its top (`top=`), by rejections and by requests,
// over the last minute of whole slices flushed, as report/top_json.hpp
// writes them.  One call to Redis (src/top/top_script.hpp) per query.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

// The query's answer; `top` is the ?top= argument as given.
ngx_int_t top_handler(ngx_http_request_t *r, const ngx_str_t &top) noexcept;

}  // namespace ratelimit
