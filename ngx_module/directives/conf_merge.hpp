// The creation and merge of the module's confs, and the checks once the
// http block is read: each location's zones bound to their definitions.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

void *create_main_conf(ngx_conf_t *cf) noexcept;
char *init_main_conf(ngx_conf_t *cf, void *conf) noexcept;
void *create_loc_conf(ngx_conf_t *cf) noexcept;
char *merge_loc_conf(ngx_conf_t *cf, void *parent, void *child) noexcept;

// Gives every rate zone its side key base (Zone::side_base) when some
// `ratelimit_query` has override=on, else every zone with ban=, once the
// http block is read; NGX_ERROR on no memory.
ngx_int_t name_side_keys(ngx_conf_t *cf, MainConf *mcf) noexcept;

}  // namespace ratelimit
