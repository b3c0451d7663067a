#include "common/ngx_glue.hpp"

namespace ratelimit {

void init_event(ngx_event_t *ev, ngx_event_handler_pt handler, void *data,
                ngx_log_t *log) noexcept
{
    ngx_memzero(ev, sizeof(ngx_event_t));
    ev->handler = handler;
    ev->data = data;
    ev->log = log;
    ev->cancelable = 1;
}

ngx_int_t add_phase_handler(ngx_conf_t *cf, ngx_http_phases phase,
                            ngx_http_handler_pt handler) noexcept
{
    auto *cmcf = static_cast<ngx_http_core_main_conf_t *>(
        ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module));
    auto *h = static_cast<ngx_http_handler_pt *>(
        ngx_array_push(&cmcf->phases[phase].handlers));

    if (h == nullptr) {
        return NGX_ERROR;
    }

    *h = handler;
    return NGX_OK;
}

bool add_header(ngx_http_request_t *r, ngx_str_t name, ngx_str_t value)
{
    auto *h = static_cast<ngx_table_elt_t *>(
        ngx_list_push(&r->headers_out.headers));

    if (h == nullptr) {
        return false;
    }

    h->hash = 1;
    h->key = name;
    h->value = value;
#if defined(nginx_version) && nginx_version >= 1023000
    h->next = nullptr;
#endif
    return true;
}

const ngx_table_elt_t *find_header(ngx_http_request_t *r,
                                   const ngx_str_t &name) noexcept
{
    ngx_list_part_t *part = &r->headers_in.headers.part;
    auto *h = static_cast<ngx_table_elt_t *>(part->elts);

    for (ngx_uint_t i = 0; /* void */; i++) {
        if (i >= part->nelts) {
            if (part->next == nullptr) {
                return nullptr;
            }
            part = part->next;
            h = static_cast<ngx_table_elt_t *>(part->elts);
            i = 0;
        }

        if (h[i].key.len == name.len
            && ngx_strncasecmp(h[i].key.data, name.data, name.len) == 0)
        {
            return &h[i];
        }
    }
}

}  // namespace ratelimit
