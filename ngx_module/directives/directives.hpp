// The module's directives and the creation and merge of its configuration.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

extern ngx_command_t commands[];

void *create_main_conf(ngx_conf_t *cf) noexcept;
char *init_main_conf(ngx_conf_t *cf, void *conf) noexcept;
void *create_loc_conf(ngx_conf_t *cf) noexcept;
char *merge_loc_conf(ngx_conf_t *cf, void *parent, void *child) noexcept;

}  // namespace ratelimit
