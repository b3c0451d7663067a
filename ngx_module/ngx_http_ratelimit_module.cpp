// ngx_http_ratelimit_module: one rate limit shared by every nginx server
// that points at the same Redis.  This file is the module object; each
// concern lives in its own file beside it.

#include "http/access_handler.hpp"
#include "rate/call_batch.hpp"
#include "rate/script_call.hpp"
#include "limits/deny_cache.hpp"
#include "rate/forgive_listener.hpp"
#include "directives/conf_merge.hpp"
#include "directives/directives.hpp"
#include "http/header_filter.hpp"
#include "http/release_filter.hpp"
#include "http/request_metrics.hpp"
#include "http/settle_handler.hpp"
#include "metrics/metrics.hpp"
#include "redis/redis_link.hpp"
#include "concurrency/permit_gate.hpp"
#include "http/variables.hpp"
#include "local/local_breaker.hpp"
#include "local/local_memory.hpp"
#include "leases/lease_decision.hpp"
#include "top/top_flush.hpp"
#include "top/top_memory.hpp"
#include "worker/worker_objects.hpp"

#include <new>

namespace ratelimit {

namespace {

ngx_int_t preconfiguration(ngx_conf_t *cf) noexcept
{
    return add_variables(cf);
}

// Preaccess, as limit_req: the access phase can be skipped by
// `satisfy any` and is not run for subrequests.  nginx runs a phase's
// handlers from the last added to the first, and a dynamic module is set
// up after the built-in ones: added last, the handler would run before
// realip's (its keys would see the proxy's address, and nginx would cache
// $remote_addr so) and before limit_req and limit_conn (it would count
// requests they then reject).  It goes first in the list, to run last.
ngx_int_t add_preaccess_handler(ngx_conf_t *cf) noexcept
{
    auto *cmcf = static_cast<ngx_http_core_main_conf_t *>(
        ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module));
    ngx_array_t *handlers = &cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers;

    if (ngx_array_push(handlers) == nullptr) {
        return NGX_ERROR;
    }

    auto *h = static_cast<ngx_http_handler_pt *>(handlers->elts);

    ngx_memmove(h + 1, h, (handlers->nelts - 1) * sizeof(*h));
    h[0] = preaccess_handler;
    return NGX_OK;
}

ngx_int_t postconfiguration(ngx_conf_t *cf) noexcept
{
    if (add_preaccess_handler(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    auto *mcf = static_cast<MainConf *>(
        ngx_http_conf_get_module_main_conf(cf, ngx_http_ratelimit_module));

    if (name_side_keys(cf, mcf) != NGX_OK
        || metrics::add_shared_zone(cf, mcf) != NGX_OK
        || local::add_shared_zone(cf, mcf) != NGX_OK
        || top::add_shared_zone(cf, mcf) != NGX_OK
        || install_request_log_handler(cf) != NGX_OK
        || install_settle_handler(cf) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (install_header_filter(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    // Only a concurrency zone holds anything to give back: without one,
    // responses do not pass through it.
    return mcf->concurrency ? install_release_filter(cf) : NGX_OK;
}

MainConf *cycle_main_conf(ngx_cycle_t *cycle)
{
    return static_cast<MainConf *>(
        ngx_http_cycle_get_module_main_conf(cycle,
                                            ngx_http_ratelimit_module));
}

// The worker's objects (worker/worker_objects.hpp), the link last: it
// starts connecting once everything that listens to it is there.
ngx_int_t create_worker_objects(ngx_cycle_t *cycle, MainConf *mcf) noexcept
{
    WorkerObjects &worker = worker_objects();

    worker.link = new (std::nothrow) RedisLink(*mcf, cycle->log);
    worker.denied = new (std::nothrow) DenyCache();

    if (worker.link == nullptr || worker.denied == nullptr) {
        return NGX_ERROR;
    }

    worker.calls = new (std::nothrow) CallBatcher(worker.link, *mcf->redis,
                                                  rate_reply_sink(),
                                                  cycle->log);

    if (worker.calls == nullptr) {
        return NGX_ERROR;
    }

    if (mcf->concurrency) {
        worker.permits = new (std::nothrow) PermitGate(worker.link, mcf->prefix,
                                                       mcf->redis->wake_key,
                                                       cycle->log);

        if (worker.permits == nullptr || !worker.permits->subscribe()) {
            return NGX_ERROR;
        }
    }

    if (mcf->forgive) {
        worker.forgive = new (std::nothrow) ForgiveListener(
            worker.link, mcf->prefix, mcf->redis->wake_key, worker.denied,
            mcf->local_zone, {forget_lease_override, mcf}, cycle->log);

        if (worker.forgive == nullptr || !worker.forgive->subscribe()) {
            return NGX_ERROR;
        }
    }

    if (mcf->local) {
        worker.breaker = new (std::nothrow) LocalBreaker(worker.link, *mcf,
                                                         cycle->log);

        if (worker.breaker == nullptr || !worker.breaker->start(cycle)) {
            return NGX_ERROR;
        }
    }

    if (mcf->top_zone != nullptr) {
        worker.top = new (std::nothrow) TopFlusher(worker.link, *mcf,
                                                   cycle->log);

        if (worker.top == nullptr) {
            return NGX_ERROR;
        }

        worker.top->start();
    }

    worker.link->connect_first();
    return NGX_OK;
}

// The link answers its calls in flight with NULL as it shuts down: the
// batcher and the gate outlive that, the link outlives them.
void destroy_worker_objects() noexcept
{
    WorkerObjects &worker = worker_objects();

    if (worker.link != nullptr) {
        worker.link->shutdown();
    }

    delete worker.calls;
    delete worker.permits;
    delete worker.forgive;
    delete worker.breaker;
    delete worker.top;
    delete worker.link;
    delete worker.denied;
    worker = {};
}

// Only processes that serve requests talk to Redis: not the master, the
// cache manager or the cache loader.
ngx_int_t init_process(ngx_cycle_t *cycle) noexcept
{
    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return NGX_OK;
    }

    MainConf *mcf = cycle_main_conf(cycle);

    if (mcf == nullptr) {
        return NGX_OK;
    }

    if (metrics::start_worker(cycle, mcf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (mcf->redis == nullptr || !mcf->used) {
        return NGX_OK;
    }

    if (create_worker_objects(cycle, mcf) != NGX_OK) {
        return NGX_ERROR;
    }

    return start_lease_sweep(cycle, mcf);
}

void exit_process(ngx_cycle_t *cycle) noexcept
{
    if (cycle_main_conf(cycle) == nullptr) {
        return;
    }

    stop_lease_sweep();
    destroy_worker_objects();
    metrics::stop_worker();
}

ngx_http_module_t module_ctx = {
    preconfiguration,
    postconfiguration,
    create_main_conf,
    init_main_conf,
    nullptr,
    nullptr,
    create_loc_conf,
    merge_loc_conf,
};

}  // namespace

}  // namespace ratelimit

extern "C" {

ngx_module_t ngx_http_ratelimit_module = {
    NGX_MODULE_V1,
    &ratelimit::module_ctx,
    ratelimit::commands,
    NGX_HTTP_MODULE,
    nullptr,
    nullptr,
    ratelimit::init_process,
    nullptr,
    nullptr,
    ratelimit::exit_process,
    nullptr,
    NGX_MODULE_V1_PADDING,
};

}
