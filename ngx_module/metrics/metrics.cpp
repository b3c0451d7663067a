#include "metrics/metrics.hpp"

#include <ctime>
#include <new>

namespace ratelimit {

namespace metrics {

namespace {

// A worker's view of the shared block, and what it keeps to itself.
struct Worker {
    MetricsLayout layout;
    void *block;
    std::size_t row;
    LinkCounters *link;
    ngx_uint_t *zones_in_flight;  // per zone: requests let through, not done
};

// This worker process's row: set in init_process, cleared in exit_process;
// a reload starts new processes, so it never outlives its cycle.
Worker *worker;

void add(std::uint64_t *counter, std::uint64_t n)
{
    ngx_atomic_fetch_add(reinterpret_cast<ngx_atomic_t *>(counter), n);
}

template <std::size_t kBounds>
void observe(Histogram<kBounds> *h, const std::uint64_t (&bounds)[kBounds],
             std::uint64_t value)
{
    add(&h->buckets[bucket_index(bounds, kBounds, value)], 1);
    add(&h->sum, value);
}

ZoneCounters *zone_counters(ngx_uint_t zone)
{
    return worker->layout.zone(worker->block, worker->row, zone);
}

void enter_busy(ngx_uint_t zone)
{
    if (worker->zones_in_flight[zone]++ == 0) {
        busy_clock::enter(worker->layout.busy_word(worker->block, zone),
                          worker->row, now_us());
    }
}

// A check came to `decision` after `wait_us`.
void count_decision(ZoneCounters *z, Decision decision, std::uint64_t wait_us)
{
    add(&z->decisions[static_cast<std::size_t>(decision)], 1);
    observe(&z->check_us, kDurationBoundsUs, wait_us);
}

// A request the zone let through ends at `now` (now_us()): a success's
// response time runs from `start_us` (the preaccess phase saw its
// headers), in microseconds: nginx's own $request_time has milliseconds
// only.
void leave_busy(ngx_uint_t zone, bool success, std::uint64_t start_us,
                std::uint64_t now)
{
    ZoneCounters *z = zone_counters(zone);

    if (success) {
        add(&z->successes, 1);
        add(&z->response_us, now - start_us);
    }

    if (--worker->zones_in_flight[zone] == 0) {
        busy_clock::leave(worker->layout.busy_word(worker->block, zone),
                          worker->row, now, &z->busy_us);
    }
}

// A reused zone (a reload that kept the zone set, so its name, and the
// worker count) keeps its block, whose pointer the slab pool holds.
ngx_int_t init_shared_zone(ngx_shm_zone_t *zone, void *old) noexcept
{
    auto *shared = static_cast<MetricsShared *>(zone->data);
    auto *pool = reinterpret_cast<ngx_slab_pool_t *>(zone->shm.addr);

    if (old != nullptr) {
        shared->block = pool->data;
        return NGX_OK;
    }

    shared->block = ngx_slab_calloc(pool, shared->layout.size());

    if (shared->block == nullptr) {
        return NGX_ERROR;
    }

    pool->data = shared->block;
    return NGX_OK;
}

// One row per worker; worker_processes may come after the http block,
// and is unset here then: a row per CPU covers `auto`.  Workers past the
// rows share one (counts stay exact: every add is atomic).
std::size_t row_count(ngx_conf_t *cf)
{
    auto *ccf = reinterpret_cast<ngx_core_conf_t *>(
        ngx_get_conf(cf->cycle->conf_ctx, ngx_core_module));

    return ccf->worker_processes > 0
           ? static_cast<std::size_t>(ccf->worker_processes)
           : static_cast<std::size_t>(ngx_ncpu > 0 ? ngx_ncpu : 1);
}

}  // namespace

ngx_int_t add_shared_zone(ngx_conf_t *cf, MainConf *mcf) noexcept
{
    if (!mcf->metrics) {
        return NGX_OK;
    }

    ngx_uint_t zones = mcf->zones.nelts;
    auto **defined = static_cast<Zone **>(mcf->zones.elts);
    auto *names = static_cast<std::string_view *>(
        ngx_palloc(cf->temp_pool, (zones + 1) * sizeof(std::string_view)));
    void *memory = ngx_palloc(cf->pool, sizeof(MetricsShared));
    auto *name = static_cast<u_char *>(ngx_pnalloc(cf->pool, 64));

    if (names == nullptr || memory == nullptr || name == nullptr) {
        return NGX_ERROR;
    }

    for (ngx_uint_t i = 0; i < zones; i++) {
        names[i] = view(defined[i]->name);
    }

    std::size_t rows = row_count(cf);
    auto *shared = new (memory) MetricsShared{MetricsLayout(zones, rows),
                                              nullptr};
    // Named after the zone set: a reload that changes it gets a new block,
    // while the old workers finish writing into the old one.
    ngx_str_t zone_name = {
        static_cast<size_t>(ngx_sprintf(name, "ratelimit_metrics_%016xL",
                                        layout_signature(names, zones, rows))
                            - name),
        name};
    size_t size = ngx_align(shared->layout.size(), ngx_pagesize)
                  + 8 * ngx_pagesize;  // the slab pool's own pages
    ngx_shm_zone_t *zone = ngx_shared_memory_add(cf, &zone_name, size,
                                                 &ngx_http_ratelimit_module);

    if (zone == nullptr) {
        return NGX_ERROR;
    }

    zone->init = init_shared_zone;
    zone->data = shared;
    mcf->metrics_zone = zone;
    return NGX_OK;
}

std::uint64_t now_us() noexcept
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000
           + static_cast<std::uint64_t>(ts.tv_nsec) / 1000;
}

ngx_int_t start_worker(ngx_cycle_t *cycle, MainConf *mcf) noexcept
{
    if (mcf->metrics_zone == nullptr) {
        return NGX_OK;
    }

    auto *shared = static_cast<MetricsShared *>(mcf->metrics_zone->data);
    const MetricsLayout &layout = shared->layout;
    std::size_t row = ngx_worker % layout.rows();

    worker = new (std::nothrow) Worker{layout, shared->block, row,
                                       layout.link(shared->block, row),
                                       nullptr};

    if (worker == nullptr) {
        return NGX_ERROR;
    }

    worker->zones_in_flight = static_cast<ngx_uint_t *>(ngx_pcalloc(
        cycle->pool, (layout.zones() + 1) * sizeof(ngx_uint_t)));

    if (worker->zones_in_flight == nullptr) {
        stop_worker();
        return NGX_ERROR;
    }

    record_link_state(LinkState::kDown);
    record_requests_waiting(0);
    return NGX_OK;
}

void stop_worker() noexcept
{
    delete worker;
    worker = nullptr;
}

bool enabled() noexcept
{
    return worker != nullptr;
}

std::uint64_t check_clock() noexcept
{
    return worker != nullptr ? now_us() : 0;
}

bool record_zone_decision(ngx_uint_t zone, Decision decision,
                          std::uint64_t wait_us) noexcept
{
    if (worker == nullptr) {
        return false;
    }

    count_decision(zone_counters(zone), decision, wait_us);

    if (decision == Decision::kRejected
        || decision == Decision::kErrorRejected)
    {
        return false;
    }

    enter_busy(zone);
    return true;
}

void record_zone_done(ngx_uint_t zone, bool success, std::uint64_t start_us,
                      std::uint64_t now) noexcept
{
    if (worker != nullptr) {
        leave_busy(zone, success, start_us, now);
    }
}

void record_deny_cache_hit(ngx_uint_t zone) noexcept
{
    if (worker != nullptr) {
        add(&zone_counters(zone)->deny_cache_hits, 1);
    }
}

void record_units(ngx_uint_t zone, UnitEvent event,
                  std::uint64_t units) noexcept
{
    if (worker != nullptr && units > 0) {
        add(&zone_counters(zone)->units[static_cast<std::size_t>(event)],
            units);
    }
}

void record_settle(ngx_uint_t zone, SettleOutcome outcome) noexcept
{
    if (worker != nullptr) {
        add(&zone_counters(zone)->settles[static_cast<std::size_t>(outcome)],
            1);
    }
}

void record_override_change(ngx_uint_t zone,
                            OverrideChangeKind change) noexcept
{
    if (worker != nullptr) {
        add(&zone_counters(zone)->override_changes[
                static_cast<std::size_t>(change)],
            1);
    }
}

void record_ban(ngx_uint_t zone) noexcept
{
    if (worker != nullptr) {
        add(&zone_counters(zone)->bans, 1);
    }
}

void record_banned_request(ngx_uint_t zone) noexcept
{
    if (worker != nullptr) {
        add(&zone_counters(zone)->banned_requests, 1);
    }
}

void record_zone_delay(ngx_uint_t zone, std::uint64_t wait_ms) noexcept
{
    if (worker != nullptr) {
        ZoneCounters *z = zone_counters(zone);
        add(&z->delayed, 1);
        observe(&z->delay_us, kQueueWaitBoundsUs, wait_ms * 1000);
    }
}

void record_zone_limit(ngx_uint_t zone, std::uint64_t limit,
                       std::uint64_t now) noexcept
{
    if (worker != nullptr) {
        ZoneCounters *z = zone_counters(zone);
        __atomic_store_n(&z->applied_limit, limit, __ATOMIC_RELAXED);
        __atomic_store_n(&z->applied_us, now, __ATOMIC_RELAXED);
    }
}

void record_local_decision(ngx_uint_t zone, LocalDecision decision) noexcept
{
    if (worker != nullptr) {
        add(&zone_counters(zone)->local[static_cast<std::size_t>(decision)], 1);
    }
}

void record_local_state(bool open) noexcept
{
    if (worker == nullptr) {
        return;
    }

    std::uint64_t *since = &worker->link->local_since_us;
    std::uint64_t now = now_us();

    if (open) {
        __atomic_store_n(since, now, __ATOMIC_RELAXED);
        return;
    }

    std::uint64_t start = __atomic_load_n(since, __ATOMIC_RELAXED);

    if (start != 0) {
        add(&worker->link->local_us, now - start);
        __atomic_store_n(since, 0, __ATOMIC_RELEASE);
    }
}

void record_permit_outcome(ngx_uint_t zone, Decision decision,
                           PermitEvent event, std::uint64_t start_us,
                           ngx_msec_t queue_ms) noexcept
{
    if (worker == nullptr) {
        return;
    }

    ZoneCounters *z = zone_counters(zone);

    count_decision(z, decision, now_us() - start_us);

    if (event != PermitEvent::kCount) {
        add(&z->permit_events[static_cast<std::size_t>(event)], 1);
    }

    if (event == PermitEvent::kAdmittedAfterWait) {
        observe(&z->queue_wait_us, kQueueWaitBoundsUs,
                std::uint64_t{queue_ms} * 1000);
    }

    if (event == PermitEvent::kAdmitted
        || event == PermitEvent::kAdmittedAfterWait)
    {
        add(&z->permits_taken, 1);
        enter_busy(zone);
    }
}

void record_permit_queued(ngx_uint_t zone, bool entering) noexcept
{
    if (worker != nullptr) {
        ZoneCounters *z = zone_counters(zone);
        add(entering ? &z->queue_entered : &z->queue_left, 1);
    }
}

void record_permit_event(ngx_uint_t zone, PermitEvent event) noexcept
{
    if (worker != nullptr) {
        auto kind = static_cast<std::size_t>(event);
        add(&zone_counters(zone)->permit_events[kind], 1);
    }
}

void record_permit_freed(ngx_uint_t zone, bool success,
                         std::uint64_t start_us) noexcept
{
    if (worker != nullptr) {
        add(&zone_counters(zone)->permits_freed, 1);
        leave_busy(zone, success, start_us, now_us());
    }
}

std::uint64_t record_call_sent(ngx_uint_t requests) noexcept
{
    if (worker == nullptr) {
        return 0;
    }

    add(&worker->link->calls, 1);
    observe(&worker->link->requests_per_call, kBatchBoundsCount, requests);
    return now_us();
}

void record_call_answered(bool replied, std::uint64_t sent_us) noexcept
{
    if (worker != nullptr && replied && sent_us != 0) {
        observe(&worker->link->round_trip_us, kDurationBoundsUs,
                now_us() - sent_us);
    }
}

void record_link_error(LinkError kind) noexcept
{
    if (worker != nullptr) {
        add(&worker->link->errors[static_cast<std::size_t>(kind)], 1);
    }
}

void record_reconnect() noexcept
{
    if (worker != nullptr) {
        add(&worker->link->reconnects, 1);
    }
}

void record_link_state(LinkState state) noexcept
{
    if (worker != nullptr) {
        __atomic_store_n(&worker->link->state,
                         static_cast<std::uint64_t>(state), __ATOMIC_RELAXED);
    }
}

void record_requests_waiting(ngx_uint_t requests) noexcept
{
    if (worker == nullptr) {
        return;
    }

    __atomic_store_n(&worker->link->waiting, std::uint64_t{requests},
                     __ATOMIC_RELAXED);
}

}  // namespace metrics

}  // namespace ratelimit
