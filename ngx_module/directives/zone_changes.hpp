// What a reload changes of a zone that drops its subjects' counts: the
// window script starts afresh a key written under another bucket length
// or algorithm (scripts/lua/window.lua), and the configuration cannot
// tell Redis what the old one was.  A reload compares each zone with the
// zone of the same name in the configuration it replaces and warns at the
// zone's line; `nginx -t` and a first start have nothing to compare with.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

// Warns if the running configuration has a zone of `zone`'s name whose
// counts `zone` cannot read.
void warn_zone_change(ngx_conf_t *cf, const Zone &zone) noexcept;

}  // namespace ratelimit
