#include "directives/conf_params.hpp"

#include <cstdarg>

namespace ratelimit {

namespace {

// Where an error or a warning is told.
enum class ErrorPlace {
    kDirective,     // the directive being read: nginx adds its place
    kAfterBlock     // a directive read before: the text names its place
};

// The one place the module's directives fail or warn.  ngx_conf_log_error()
// cuts its text at NGX_MAX_CONF_ERRSTR bytes, ngx_log_error() a whole line
// at NGX_MAX_ERROR_STR: the text is formatted into as many bytes, so that
// it is cut as when it was passed to them.
void log_directive(ngx_conf_t *cf, ngx_uint_t level, ErrorPlace place,
                   ngx_err_t err, const char *fmt, va_list args)
{
    u_char text[NGX_MAX_ERROR_STR];
    size_t size = place == ErrorPlace::kDirective ? NGX_MAX_CONF_ERRSTR
                                                  : NGX_MAX_ERROR_STR;
    u_char *end = ngx_vslprintf(text, text + size, fmt, args);

    if (place == ErrorPlace::kDirective) {
        ngx_conf_log_error(level, cf, err, "%*s", end - text, text);
    } else {
        ngx_log_error(level, cf->log, err, "%*s", end - text, text);
    }
}

char *log_directive_error(ngx_conf_t *cf, ErrorPlace place, ngx_err_t err,
                          const char *fmt, va_list args)
{
    log_directive(cf, NGX_LOG_EMERG, place, err, fmt, args);
    return static_cast<char *>(NGX_CONF_ERROR);
}

}  // namespace

char *directive_error(ngx_conf_t *cf, const char *fmt, ...) noexcept
{
    va_list args;
    va_start(args, fmt);
    char *rv = log_directive_error(cf, ErrorPlace::kDirective, 0, fmt, args);
    va_end(args);
    return rv;
}

char *directive_errno_error(ngx_conf_t *cf, ngx_err_t err, const char *fmt,
                            ...) noexcept
{
    va_list args;
    va_start(args, fmt);
    char *rv = log_directive_error(cf, ErrorPlace::kDirective, err, fmt,
                                   args);
    va_end(args);
    return rv;
}

char *after_block_error(ngx_conf_t *cf, const char *fmt, ...) noexcept
{
    va_list args;
    va_start(args, fmt);
    char *rv = log_directive_error(cf, ErrorPlace::kAfterBlock, 0, fmt,
                                   args);
    va_end(args);
    return rv;
}

void directive_warning(ngx_conf_t *cf, const char *fmt, ...) noexcept
{
    va_list args;
    va_start(args, fmt);
    log_directive(cf, NGX_LOG_WARN, ErrorPlace::kDirective, 0, fmt, args);
    va_end(args);
}

void after_block_warning(ngx_conf_t *cf, const char *fmt, ...) noexcept
{
    va_list args;
    va_start(args, fmt);
    log_directive(cf, NGX_LOG_WARN, ErrorPlace::kAfterBlock, 0, fmt, args);
    va_end(args);
}

char *nginx_logged_error() noexcept
{
    return static_cast<char *>(NGX_CONF_ERROR);
}

char *param_error(ngx_conf_t *cf, const ParamError &error) noexcept
{
    return directive_error(cf, "%*s", error.text.size(), error.text.data());
}

char *duplicate_param(ngx_conf_t *cf, const ngx_str_t &param) noexcept
{
    return directive_error(cf, "duplicate parameter \"%V\"", &param);
}

char *invalid_param(ngx_conf_t *cf, const ngx_str_t &param) noexcept
{
    return directive_error(cf, "invalid parameter \"%V\"", &param);
}

char *duplicate_directive(ngx_conf_t *cf) noexcept
{
    auto *args = static_cast<ngx_str_t *>(cf->args->elts);
    return directive_error(cf, "\"%V\" directive is duplicate", &args[0]);
}

ParamTokens directive_tokens(ngx_conf_t *cf)
{
    auto *args = static_cast<ngx_str_t *>(cf->args->elts);
    ParamTokens tokens;

    tokens.reserve(cf->args->nelts);

    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        tokens.push_back(view(args[i]));
    }

    return tokens;
}

ngx_str_t arg_string(std::string_view arg)
{
    return {arg.size(),
            reinterpret_cast<u_char *>(const_cast<char *>(arg.data()))};
}

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

char *take_zone_name(ngx_conf_t *cf, const ngx_str_t &arg,
                     ngx_str_t *name) noexcept
{
    if (name->data != nullptr) {
        return duplicate_param(cf, arg);
    }

    ngx_str_t value;

    if (!take_param(arg, "zone=", &value) || value.len == 0) {
        return invalid_param(cf, arg);
    }

    *name = value;
    return NGX_CONF_OK;
}

bool compile_value(ngx_conf_t *cf, ngx_str_t *value,
                   ngx_http_complex_value_t *out) noexcept
{
    ngx_http_compile_complex_value_t ccv;
    ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));
    ccv.cf = cf;
    ccv.value = value;
    ccv.complex_value = out;
    return ngx_http_compile_complex_value(&ccv) == NGX_OK;
}

}  // namespace ratelimit
