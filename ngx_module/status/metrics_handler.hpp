// `ratelimit_metrics`: the location answers with the counters of every zone
// and of the Redis link, summed over the workers, as Prometheus text,
// OpenMetrics or JSON (see metrics_text.hpp).
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

char *set_metrics(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept;

}  // namespace ratelimit
