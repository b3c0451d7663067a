#include "status/dashboard_handler.hpp"

#include "status/status_handler.hpp"

namespace ratelimit {

namespace {

// The page's script and style are inline and it fetches only from its own
// origin; nothing else loads, and no other site may frame it (its buttons
// forgive and set limits).
const ngx_str_t kPolicyName = ngx_string("Content-Security-Policy");
const ngx_str_t kPolicy = ngx_string(
    "default-src 'none'; script-src 'unsafe-inline'; "
    "style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'");

}  // namespace

ngx_int_t dashboard_handler(ngx_http_request_t *r) noexcept
{
    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    ngx_int_t rc = ngx_http_discard_request_body(r);

    if (rc != NGX_OK) {
        return rc;
    }

    if (!add_header(r, kPolicyName, kPolicy)) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    // The page lives as long as the configuration; nginx only reads it.
    const ngx_str_t &page = loc_conf(r)->dashboard;
    return send_body(r, NGX_HTTP_OK, "text/html; charset=utf-8", page.data,
                     page.len);
}

}  // namespace ratelimit
