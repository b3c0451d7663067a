#include "http/settle_handler.hpp"

#include "rate/reservations.hpp"

namespace ratelimit {

namespace {

// The main request's state is found from any request of it; a subrequest
// logged on its own (log_subrequest) settles nothing, and the main request
// settles once however often the phase runs.
ngx_int_t settle_handler(ngx_http_request_t *r) noexcept
{
    if (r != r->main) {
        return NGX_OK;
    }

    if (RequestState *state = find_state(r)) {
        settle_reservations(state);
    }

    return NGX_OK;
}

}  // namespace

ngx_int_t install_settle_handler(ngx_conf_t *cf) noexcept
{
    auto *mcf = static_cast<MainConf *>(
        ngx_http_conf_get_module_main_conf(cf, ngx_http_ratelimit_module));

    if (!mcf->settles) {
        return NGX_OK;
    }

    auto *cmcf = static_cast<ngx_http_core_main_conf_t *>(
        ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module));
    auto *h = static_cast<ngx_http_handler_pt *>(
        ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers));

    if (h == nullptr) {
        return NGX_ERROR;
    }

    *h = settle_handler;
    return NGX_OK;
}

}  // namespace ratelimit
