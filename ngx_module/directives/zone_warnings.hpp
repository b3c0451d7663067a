// What `nginx -t` warns of in a ratelimit_zone it accepts: its policy's
// traps (params/zone_warnings.hpp), and a literal key that names one of
// nginx's variables.
#pragma once

#include "conf/module_conf.hpp"
#include "params/zone_params.hpp"

namespace ratelimit {

// Warns of the zone being read, at its line.  Throws std::bad_alloc.
void warn_zone(ngx_conf_t *cf, const ZoneParams &params);

}  // namespace ratelimit
