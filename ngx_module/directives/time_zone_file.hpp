// A calendar zone's time zone (`tz=`), read with the configuration: the
// file of its name in the tz database's directory ($TZDIR, as the C
// library's, else /usr/share/zoneinfo), parsed by src/calendar.  A name
// nginx cannot read as a zone fails `nginx -t`, with what to do.
#pragma once

#include "conf/module_conf.hpp"
#include "params/zone_params.hpp"

namespace ratelimit {

// The periods of `params`'s calendar zone into zone->calendar, in the
// configuration's pool, and its tz= into zone->tz; NGX_CONF_OK, or the
// directive's error.  Throws std::bad_alloc.
char *add_calendar(ngx_conf_t *cf, const ZoneParams &params, Zone *zone);

}  // namespace ratelimit
