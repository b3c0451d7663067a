// The pieces every directive handler of the module is written with: its
// tokens for the parsers of src/params, NAME=VALUE parameters, copies into
// pools, and the one way a directive fails.
#pragma once

#include "conf/module_conf.hpp"
#include "params/param_values.hpp"

namespace ratelimit {

// Every handler fails through these, never by returning NGX_CONF_ERROR or
// a string itself.  Each returns NGX_CONF_ERROR.
//
// An error of the directive being read, "[emerg] TEXT in FILE:LINE"
// (nginx adds where the directive stands).  fmt as ngx_sprintf's.
char *directive_error(ngx_conf_t *cf, const char *fmt, ...) noexcept;

// The same with the text of errno `err` after TEXT, as nginx adds it.
char *directive_errno_error(ngx_conf_t *cf, ngx_err_t err, const char *fmt,
                            ...) noexcept;

// An error found once the http block is read, of a directive read before:
// nginx's line is then the block's end, so TEXT names the FILE:LINE the
// directive stored when it was read.
char *after_block_error(ngx_conf_t *cf, const char *fmt, ...) noexcept;

// A warning: `nginx -t` passes, and prints "[warn] TEXT in FILE:LINE".
// Of the directive being read, as directive_error(); of one read before,
// found once the http block is read, as after_block_error(): TEXT then
// ends in " in %V:%ui", the place the directive stored.
void directive_warning(ngx_conf_t *cf, const char *fmt, ...) noexcept;
void after_block_warning(ngx_conf_t *cf, const char *fmt, ...) noexcept;

// An error nginx has logged itself: no memory (ngx_palloc says so), a
// value it could not compile, a TLS call that failed.
char *nginx_logged_error() noexcept;

// An error of the parsers of src/params, for the directive being read.
char *param_error(ngx_conf_t *cf, const ParamError &error) noexcept;

char *duplicate_param(ngx_conf_t *cf, const ngx_str_t &param) noexcept;
char *invalid_param(ngx_conf_t *cf, const ngx_str_t &param) noexcept;

// `"NAME" directive is duplicate`, nginx's words for a directive that
// may be given once.
char *duplicate_directive(ngx_conf_t *cf) noexcept;

// The arguments of the directive being read, after its name: views of
// nginx's own copies, which live as long as the configuration.  Throws
// std::bad_alloc.
ParamTokens directive_tokens(ngx_conf_t *cf);

// A view of a directive's argument (see directive_tokens()) as nginx's
// string again.
ngx_str_t arg_string(std::string_view arg);

// The value after `name` ("zone=") if `param` starts with it.
bool take_param(const ngx_str_t &param, const char *name, ngx_str_t *value);

// `zone=NAME` of a location's directive, once and not empty, into *name
// (nullptr data until then).
char *take_zone_name(ngx_conf_t *cf, const ngx_str_t &arg,
                     ngx_str_t *name) noexcept;

// Compiles `value` as nginx's complex values (variables); false if nginx
// logged why not.
bool compile_value(ngx_conf_t *cf, ngx_str_t *value,
                   ngx_http_complex_value_t *out) noexcept;

// A NUL-terminated copy in `pool`; false on no memory.
bool copy_cstring(ngx_pool_t *pool, const u_char *data, size_t len,
                  ngx_str_t *out);

}  // namespace ratelimit
