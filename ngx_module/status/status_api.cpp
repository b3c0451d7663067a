#include "status/status_api.hpp"

#include "status/forgive_handler.hpp"
#include "status/override_handler.hpp"
#include "status/status_handler.hpp"
#include "status/top_handler.hpp"

namespace ratelimit {

ngx_int_t status_api_handler(ngx_http_request_t *r) noexcept
{
    const LocConf *lcf = loc_conf(r);

    if (r->method == NGX_HTTP_DELETE && lcf->query_delete) {
        return forgive_handler(r);
    }

    if (r->method == NGX_HTTP_PUT && lcf->query_override) {
        return override_handler(r);
    }

    ngx_str_t top;

    if ((r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD))
        && ngx_http_arg(r, (u_char *) "top", 3, &top) == NGX_OK)
    {
        return top_handler(r, top);
    }

    return query_handler(r);
}

}  // namespace ratelimit
