// `ratelimit_metrics`: the location answers with the counters of every zone
// and of the Redis link, summed over the workers, as Prometheus text,
// OpenMetrics or JSON (see metrics_text.hpp).
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

// The content handler of a location with `ratelimit_metrics`.
ngx_int_t metrics_handler(ngx_http_request_t *r) noexcept;

}  // namespace ratelimit
