// The directives that say where Redis is and how to reach it:
// ratelimit_redis and ratelimit_redis_ssl*.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

char *set_redis(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept;

// A file the TLS directives name (cmd->offset: a ConfFile in MainConf);
// one that cannot be read fails here, with the directive's line.
char *set_tls_file(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept;

extern ngx_conf_bitmask_t tls_protocols[];

// The unset values of a new main configuration's Redis part.
void init_redis_defaults(MainConf *mcf) noexcept;

// Once the http block is read: defaults, nginx's resolver if the block
// has one, the addresses resolved, and the TLS context.
char *finish_redis_conf(ngx_conf_t *cf, MainConf *mcf) noexcept;

}  // namespace ratelimit
