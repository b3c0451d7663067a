// The pieces every directive handler of the module parses with: NAME=VALUE
// parameters, times, and nginx's wording for their errors.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

// The value after `name` ("db=") if `param` starts with it.
bool take_param(const ngx_str_t &param, const char *name, ngx_str_t *value);

// TIME in nginx syntax ("50ms", "2s", "1h"), in milliseconds, > 0.
bool parse_msec(const ngx_str_t &text, ngx_msec_t *out);

char *duplicate_param(ngx_conf_t *cf, const ngx_str_t &param);
char *invalid_param(ngx_conf_t *cf, const ngx_str_t &param);

// A NUL-terminated copy in `pool`; false on no memory.
bool copy_cstring(ngx_pool_t *pool, const u_char *data, size_t len,
                  ngx_str_t *out);

inline char *conf_error()
{
    return static_cast<char *>(NGX_CONF_ERROR);
}

}  // namespace ratelimit
