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

    return mcf->settles ? add_phase_handler(cf, NGX_HTTP_LOG_PHASE,
                                            settle_handler)
                        : NGX_OK;
}

}  // namespace ratelimit
