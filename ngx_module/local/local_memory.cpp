#include "local/local_memory.hpp"

#include "common/keyed_table.hpp"
#include "scripts/servers_script.hpp"

namespace ratelimit {

namespace local {

namespace {

struct LocalShared {
    KeyedTable subjects;         // a LocalCount per subject of a zone
    ngx_atomic_t servers;        // live servers learnt; 0: none yet
    std::uint64_t lower_since;   // ms: counts below `servers` since; 0:
                                 // the last count was not below
};

LocalShared *shared_of(ngx_shm_zone_t *zone)
{
    return static_cast<LocalShared *>(zone->data);
}

ngx_slab_pool_t *pool_of(ngx_shm_zone_t *zone)
{
    return reinterpret_cast<ngx_slab_pool_t *>(zone->shm.addr);
}

LocalCount *count_of(const KeyedEntry *entry)
{
    return static_cast<LocalCount *>(
        keyed_payload(const_cast<KeyedEntry *>(entry)));
}

// A count whose share is used up is spared: evicting it would admit the
// subject's share again, so that a flood of other subjects (of this zone
// or another) could free a limited one.
bool keep_full(const KeyedEntry *entry, void *data)
{
    return local_full(*count_of(entry), *static_cast<std::uint64_t *>(data));
}

// The subject's count, made if new, the least recently used subjects
// evicted until it fits (full ones last: KeyedEviction); nullptr only if
// the key alone is larger than the memory.
LocalCount *take_count(ngx_slab_pool_t *pool, LocalShared *shared,
                       std::string_view key, std::uint64_t now_ms)
{
    KeyedEntry *entry = take_keyed(pool, &shared->subjects, key,
                                   sizeof(LocalCount),
                                   {keep_full, nullptr, &now_ms});

    return entry != nullptr ? count_of(entry) : nullptr;
}

ngx_int_t init_shared_zone(ngx_shm_zone_t *zone, void *old) noexcept
{
    ngx_slab_pool_t *pool = pool_of(zone);

    if (old != nullptr) {
        zone->data = old;
        return NGX_OK;
    }

    if (zone->shm.exists) {
        zone->data = pool->data;
        return NGX_OK;
    }

    auto *shared = static_cast<LocalShared *>(
        ngx_slab_calloc(pool, sizeof(LocalShared)));

    if (shared == nullptr) {
        return NGX_ERROR;
    }

    init_keyed_table(&shared->subjects);
    pool->data = shared;
    zone->data = shared;
    // Full is the normal state: the oldest subjects make room, quietly.
    pool->log_nomem = 0;
    return NGX_OK;
}

}  // namespace

ngx_int_t add_shared_zone(ngx_conf_t *cf, MainConf *mcf) noexcept
{
    if (!mcf->local) {
        return NGX_OK;
    }

    ngx_str_t name = ngx_string("ratelimit_local");
    ngx_shm_zone_t *zone = ngx_shared_memory_add(cf, &name, mcf->local_memory,
                                                 &ngx_http_ratelimit_module);

    if (zone == nullptr) {
        return NGX_ERROR;
    }

    zone->init = init_shared_zone;
    mcf->local_zone = zone;
    return NGX_OK;
}

bool count_locally(ngx_shm_zone_t *zone, LocalAsk *asks, ngx_uint_t n,
                   std::uint64_t now_ms) noexcept
{
    ngx_slab_pool_t *pool = pool_of(zone);
    LocalShared *shared = shared_of(zone);
    bool fits = true;

    ngx_shmtx_lock(&pool->mutex);

    for (ngx_uint_t i = 0; i < n; i++) {
        LocalAsk &ask = asks[i];
        LocalCount *taken = take_count(pool, shared, ask.key, now_ms);
        LocalCount count = taken != nullptr ? *taken : LocalCount{0, 0, 0};

        ask.share = local_share(local_limit(count, ask.limit, now_ms),
                                ask.servers);
        ask.status = local_status(count, ask.share, ask.window_end_ms,
                                  now_ms, ask.cost);
        fits &= ask.status.fits || !ask.enforced;

        if (taken != nullptr && !ask.status.fits) {
            local_note_full(taken, ask.status, now_ms);
        }
    }

    // Taken again: making one ask's entry may have evicted another's.
    for (ngx_uint_t i = 0; fits && i < n; i++) {
        LocalCount *taken = take_count(pool, shared, asks[i].key, now_ms);

        if (taken != nullptr) {
            local_add(taken, asks[i].window_end_ms, asks[i].cost);
            local_note_full(taken, asks[i].status, now_ms);
        }
    }

    ngx_shmtx_unlock(&pool->mutex);
    return fits;
}

void note_override(ngx_shm_zone_t *zone, std::string_view key,
                   std::uint64_t limit, std::uint64_t left_ms,
                   std::uint64_t now_ms) noexcept
{
    ngx_slab_pool_t *pool = pool_of(zone);

    ngx_shmtx_lock(&pool->mutex);

    if (LocalCount *count = take_count(pool, shared_of(zone), key, now_ms)) {
        count->override_limit = limit + 1;
        count->override_end_ms = left_ms > 0 ? now_ms + left_ms : 0;
    }

    ngx_shmtx_unlock(&pool->mutex);
}

void forget_override(ngx_shm_zone_t *zone, std::string_view key) noexcept
{
    ngx_slab_pool_t *pool = pool_of(zone);

    ngx_shmtx_lock(&pool->mutex);

    if (KeyedEntry *entry = find_keyed(&shared_of(zone)->subjects, key)) {
        count_of(entry)->override_limit = 0;
    }

    ngx_shmtx_unlock(&pool->mutex);
}

void forget_overrides(ngx_shm_zone_t *zone) noexcept
{
    ngx_slab_pool_t *pool = pool_of(zone);
    KeyedTable *subjects = &shared_of(zone)->subjects;

    ngx_shmtx_lock(&pool->mutex);

    for (KeyedEntry *e = oldest_keyed(subjects); e != nullptr;
         e = newer_keyed(subjects, e))
    {
        count_of(e)->override_limit = 0;
    }

    ngx_shmtx_unlock(&pool->mutex);
}

ngx_uint_t live_servers(ngx_shm_zone_t *zone) noexcept
{
    return __atomic_load_n(&shared_of(zone)->servers, __ATOMIC_RELAXED);
}

void learn_live_servers(ngx_shm_zone_t *zone, ngx_uint_t counted,
                        std::uint64_t now_ms) noexcept
{
    ngx_slab_pool_t *pool = pool_of(zone);
    LocalShared *shared = shared_of(zone);

    ngx_shmtx_lock(&pool->mutex);

    if (counted >= shared->servers) {
        shared->lower_since = 0;
    } else if (shared->lower_since == 0) {
        shared->lower_since = now_ms;
        counted = shared->servers;
    } else if (now_ms - shared->lower_since < kServerTtlMs) {
        counted = shared->servers;
    } else {
        shared->lower_since = 0;
    }

    __atomic_store_n(&shared->servers, counted, __ATOMIC_RELAXED);
    ngx_shmtx_unlock(&pool->mutex);
}

}  // namespace local

}  // namespace ratelimit
