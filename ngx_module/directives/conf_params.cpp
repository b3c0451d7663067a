#include "directives/conf_params.hpp"

namespace ratelimit {

bool take_param(const ngx_str_t &param, const char *name, ngx_str_t *value)
{
    size_t len = ngx_strlen(name);

    if (param.len < len || ngx_strncmp(param.data, name, len) != 0) {
        return false;
    }

    value->data = param.data + len;
    value->len = param.len - len;
    return true;
}

bool parse_msec(const ngx_str_t &text, ngx_msec_t *out)
{
    ngx_str_t copy = text;
    ngx_int_t ms = ngx_parse_time(&copy, 0);

    if (ms == NGX_ERROR || ms == 0) {
        return false;
    }

    *out = static_cast<ngx_msec_t>(ms);
    return true;
}

char *duplicate_param(ngx_conf_t *cf, const ngx_str_t &param)
{
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "duplicate parameter \"%V\"",
                       &param);
    return conf_error();
}

char *invalid_param(ngx_conf_t *cf, const ngx_str_t &param)
{
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid parameter \"%V\"",
                       &param);
    return conf_error();
}

bool copy_cstring(ngx_pool_t *pool, const u_char *data, size_t len,
                  ngx_str_t *out)
{
    out->data = static_cast<u_char *>(ngx_pnalloc(pool, len + 1));

    if (out->data == nullptr) {
        return false;
    }

    ngx_memcpy(out->data, data, len);
    out->data[len] = '\0';
    out->len = len;
    return true;
}

}  // namespace ratelimit
