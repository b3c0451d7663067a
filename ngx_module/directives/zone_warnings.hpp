// What `nginx -t` warns of in a ratelimit_zone it accepts: its policy's
// traps (params/zone_warnings.hpp), and a literal key that names one of
// nginx's variables.
#pragma once

#include "conf/module_conf.hpp"
#include "params/zone_params.hpp"

namespace ratelimit {

// Warns of the zone being read, at its line.  Throws std::bad_alloc.
void warn_zone(ngx_conf_t *cf, const ZoneParams &params);

// Warns, at the line being read, if `value` of the parameter `param`
// (cost, limit, rate) is a variable the client sets directly
// (params/zone_warnings.hpp).  Throws std::bad_alloc.
void warn_client_value(ngx_conf_t *cf, std::string_view param,
                       std::string_view value);

}  // namespace ratelimit
