#include "leases/lease_table.hpp"

#include "common/keyed_table.hpp"

namespace ratelimit {

// In the configuration's pool; `pool` and `subjects` once the shared
// memory is mapped (the subjects' LeaseState payloads in it).
struct LeaseTable {
    ngx_shm_zone_t *shm;
    ngx_slab_pool_t *pool;
    KeyedTable *subjects;
};

namespace {

LeaseState &lease_of(KeyedEntry *entry)
{
    return *static_cast<LeaseState *>(keyed_payload(entry));
}

ngx_int_t init_lease_shm(ngx_shm_zone_t *shm, void *data) noexcept
{
    auto *table = static_cast<LeaseTable *>(shm->data);

    if (data != nullptr) {
        // A reload with the same zone: the leases go on.
        auto *old = static_cast<LeaseTable *>(data);
        table->pool = old->pool;
        table->subjects = old->subjects;
        return NGX_OK;
    }

    table->pool = reinterpret_cast<ngx_slab_pool_t *>(shm->shm.addr);

    if (shm->shm.exists) {
        table->subjects = static_cast<KeyedTable *>(table->pool->data);
        return NGX_OK;
    }

    table->subjects = static_cast<KeyedTable *>(
        ngx_slab_alloc(table->pool, sizeof(KeyedTable)));

    if (table->subjects == nullptr) {
        return NGX_ERROR;
    }

    init_keyed_table(table->subjects);
    table->pool->data = table->subjects;
    // Full is the normal state: the oldest subjects make room, quietly.
    table->pool->log_nomem = 0;
    return NGX_OK;
}

// Copies a subject's key into `pool`, for a give-back sent after the unlock.
bool copy_key(ngx_pool_t *pool, const KeyedEntry *entry, ngx_str_t *out)
{
    std::string_view key = keyed_key(entry);

    out->data = static_cast<u_char *>(ngx_pnalloc(pool, key.size()));

    if (out->data == nullptr) {
        return false;
    }

    ngx_memcpy(out->data, key.data(), key.size());
    out->len = key.size();
    return true;
}

struct Eviction {
    ngx_pool_t *pool;
    ngx_array_t **backs;     // made at the first unit to give back
};

// A subject evicted to make room gives back what its lease held: every
// evicted subject's units, whatever their number (a key of another length
// may take several evictions).  Lost only on no memory for the list, as a
// crashed server's units: until their bucket leaves the window.
void on_evicted(KeyedEntry *entry, void *data) noexcept
{
    auto *eviction = static_cast<Eviction *>(data);
    LeaseParams unused;
    LeaseLedger ledger(lease_of(entry), unused);
    LeaseReturn units = ledger.release();

    if (units.units == 0) {
        return;
    }

    if (*eviction->backs == nullptr) {
        *eviction->backs = ngx_array_create(eviction->pool, 2,
                                            sizeof(LeaseGiveBack));
    }

    auto *back = *eviction->backs != nullptr
                 ? static_cast<LeaseGiveBack *>(ngx_array_push(*eviction->backs))
                 : nullptr;

    if (back != nullptr) {
        back->units = units;

        if (!copy_key(eviction->pool, entry, &back->key)) {
            (*eviction->backs)->nelts--;
        }
    }
}

}  // namespace

ngx_int_t add_lease_table(ngx_conf_t *cf, Zone *zone,
                          std::uint64_t bytes) noexcept
{
    auto *table = static_cast<LeaseTable *>(
        ngx_pcalloc(cf->pool, sizeof(LeaseTable)));
    u_char *name = static_cast<u_char *>(
        ngx_pnalloc(cf->pool, zone->name.len + sizeof("ratelimit_lease_")));

    if (table == nullptr || name == nullptr) {
        return NGX_ERROR;
    }

    ngx_str_t shm_name = {
        static_cast<size_t>(ngx_sprintf(name, "ratelimit_lease_%V",
                                        &zone->name) - name),
        name};

    table->shm = ngx_shared_memory_add(cf, &shm_name,
                                       static_cast<size_t>(bytes),
                                       &ngx_http_ratelimit_module);

    if (table->shm == nullptr) {
        return NGX_ERROR;
    }

    table->shm->init = init_lease_shm;
    table->shm->data = table;
    zone->leases = table;
    return NGX_OK;
}

LeaseEntry::LeaseEntry(LeaseTable *table, std::string_view key,
                       ngx_pool_t *pool, ngx_array_t **evicted) noexcept
    : table_(table)
{
    Eviction eviction{pool, evicted};

    *evicted = nullptr;
    ngx_shmtx_lock(&table_->pool->mutex);

    KeyedEntry *entry = take_keyed(table_->pool, table_->subjects, key,
                                   sizeof(LeaseState),
                                   {nullptr, on_evicted, &eviction});
    state_ = entry != nullptr ? &lease_of(entry) : nullptr;
}

LeaseEntry::LeaseEntry(LeaseTable *table, std::string_view key) noexcept
    : table_(table)
{
    ngx_shmtx_lock(&table_->pool->mutex);

    KeyedEntry *entry = find_keyed(table_->subjects, key);
    state_ = entry != nullptr ? &lease_of(entry) : nullptr;
}

LeaseEntry::~LeaseEntry()
{
    ngx_shmtx_unlock(&table_->pool->mutex);
}

ngx_uint_t sweep_lease_table(LeaseTable *table, const LeaseParams &params,
                             std::uint64_t now_ms, ngx_pool_t *pool,
                             LeaseGiveBack *out, ngx_uint_t max) noexcept
{
    ngx_uint_t n = 0;

    ngx_shmtx_lock(&table->pool->mutex);

    KeyedEntry *entry = oldest_keyed(table->subjects);

    while (entry != nullptr && n < max) {
        KeyedEntry *next = newer_keyed(table->subjects, entry);
        LeaseState &state = lease_of(entry);
        LeaseLedger ledger(state, params);
        LeaseReturn back = ledger.expire(now_ms);

        if (back.units > 0 && copy_key(pool, entry, &out[n].key)) {
            out[n++].units = back;
        }

        bool quiet = state.last_ms + params.idle_ms <= now_ms;

        if (!quiet) {
            // The rest were used more recently still.
            break;
        }

        if (ledger.units() == 0 && ledger.asked() == 0) {
            remove_keyed(table->pool, table->subjects, entry);
        }

        entry = next;
    }

    ngx_shmtx_unlock(&table->pool->mutex);
    return n;
}

}  // namespace ratelimit
