// `ratelimit_settle zone=NAME VALUE [empty=keep|refund];`: what a request
// really cost in a zone it was counted in, known at the log phase.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

char *set_settle(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept;

// Once the location's zones are resolved (merge_loc_conf): binds each of
// its settles to a rate zone it applies, or fails naming the settle's file
// and line.  NGX_CONF_OK, or the error, logged.
char *resolve_settles(ngx_conf_t *cf, LocConf *lcf) noexcept;

}  // namespace ratelimit
