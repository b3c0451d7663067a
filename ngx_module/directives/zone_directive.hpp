// ratelimit_zone: a zone of either kind read into the main conf, and found
// again by its name.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

// ratelimit_zone, of either kind: the kind follows from the parameters.
char *set_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept;

// The zone called `name`, if one is defined yet.
Zone *find_zone(MainConf *mcf, const ngx_str_t &name) noexcept;

}  // namespace ratelimit
