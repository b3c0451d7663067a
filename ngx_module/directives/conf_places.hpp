// Where directives read with nginx's own slots stand, for the checks made
// once the http block is read (a TLS setting while ratelimit_redis_ssl is
// off, a prefix a cluster cannot take): they name the directive's own line.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

// Notes where the directive being read stands, in MainConf::places.
char *note_place(ngx_conf_t *cf, const ngx_str_t &directive) noexcept;

// The handler of an http-block directive: nginx's `Slot`, then its place
// noted.
template <char *(*Slot)(ngx_conf_t *, ngx_command_t *, void *)>
char *placed_slot(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept
{
    char *rv = Slot(cf, cmd, conf);
    return rv == NGX_CONF_OK ? note_place(cf, cmd->name) : rv;
}

// The place of `directive` if it was given; nullptr if not.
const ConfPlace *find_place(const MainConf *mcf,
                            const char *directive) noexcept;

}  // namespace ratelimit
