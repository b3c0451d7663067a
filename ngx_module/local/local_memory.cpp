#include "local/local_memory.hpp"

#include <cstddef>

#include "scripts/servers_script.hpp"

namespace ratelimit {

namespace local {

namespace {

struct LocalShared {
    ngx_rbtree_t tree;
    ngx_rbtree_node_t sentinel;
    ngx_queue_t lru;             // the most recently used first
    ngx_atomic_t servers;        // live servers learnt; 0: none yet
    std::uint64_t lower_since;   // ms: counts below `servers` since; 0:
                                 // the last count was not below
};

// A subject's count in a zone; its key's bytes follow it.
struct LocalEntry {
    ngx_rbtree_node_t node;      // key: ngx_crc32_short() of the key
    ngx_queue_t lru;
    LocalCount count;
    std::size_t len;
    u_char key[1];
};

LocalEntry *entry_of(ngx_rbtree_node_t *node)
{
    return reinterpret_cast<LocalEntry *>(
        reinterpret_cast<u_char *>(node) - offsetof(LocalEntry, node));
}

// nginx's functions take keys as non-const bytes, and only read them.
u_char *key_bytes(std::string_view key)
{
    return reinterpret_cast<u_char *>(const_cast<char *>(key.data()));
}

LocalShared *shared_of(ngx_shm_zone_t *zone)
{
    return static_cast<LocalShared *>(zone->data);
}

ngx_slab_pool_t *pool_of(ngx_shm_zone_t *zone)
{
    return reinterpret_cast<ngx_slab_pool_t *>(zone->shm.addr);
}

// Ordered by hash, then by the key's bytes: equal hashes are told apart.
void insert_entry(ngx_rbtree_node_t *temp, ngx_rbtree_node_t *node,
                  ngx_rbtree_node_t *sentinel) noexcept
{
    ngx_rbtree_node_t **p;

    for (;;) {
        if (node->key != temp->key) {
            p = node->key < temp->key ? &temp->left : &temp->right;
        } else {
            LocalEntry *a = entry_of(node);
            LocalEntry *b = entry_of(temp);
            p = ngx_memn2cmp(a->key, b->key, a->len, b->len) < 0
                ? &temp->left : &temp->right;
        }

        if (*p == sentinel) {
            break;
        }

        temp = *p;
    }

    *p = node;
    node->parent = temp;
    node->left = sentinel;
    node->right = sentinel;
    ngx_rbt_red(node);
}

LocalEntry *find_entry(LocalShared *shared, uint32_t hash,
                       std::string_view key)
{
    ngx_rbtree_node_t *node = shared->tree.root;
    ngx_rbtree_node_t *sentinel = shared->tree.sentinel;

    while (node != sentinel) {
        if (hash != node->key) {
            node = hash < node->key ? node->left : node->right;
            continue;
        }

        LocalEntry *entry = entry_of(node);
        ngx_int_t rc = ngx_memn2cmp(key_bytes(key), entry->key, key.size(),
                                    entry->len);

        if (rc == 0) {
            return entry;
        }

        node = rc < 0 ? node->left : node->right;
    }

    return nullptr;
}

void evict_oldest(ngx_slab_pool_t *pool, LocalShared *shared)
{
    ngx_queue_t *q = ngx_queue_last(&shared->lru);
    LocalEntry *entry = ngx_queue_data(q, LocalEntry, lru);

    ngx_queue_remove(q);
    ngx_rbtree_delete(&shared->tree, &entry->node);
    ngx_slab_free_locked(pool, entry);
}

// The subject's entry, made if new, the least recently used evicted until
// it fits; nullptr only if the key alone is larger than the memory.
LocalEntry *take_entry(ngx_slab_pool_t *pool, LocalShared *shared,
                       std::string_view key)
{
    uint32_t hash = ngx_crc32_short(key_bytes(key), key.size());
    LocalEntry *entry = find_entry(shared, hash, key);

    if (entry != nullptr) {
        ngx_queue_remove(&entry->lru);
        ngx_queue_insert_head(&shared->lru, &entry->lru);
        return entry;
    }

    size_t size = offsetof(LocalEntry, key) + key.size();

    for (;;) {
        entry = static_cast<LocalEntry *>(ngx_slab_alloc_locked(pool, size));

        if (entry != nullptr || ngx_queue_empty(&shared->lru)) {
            break;
        }

        evict_oldest(pool, shared);
    }

    if (entry == nullptr) {
        return nullptr;
    }

    entry->node.key = hash;
    entry->count = {0, 0};
    entry->len = key.size();
    ngx_memcpy(entry->key, key.data(), key.size());
    ngx_rbtree_insert(&shared->tree, &entry->node);
    ngx_queue_insert_head(&shared->lru, &entry->lru);
    return entry;
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

    ngx_rbtree_init(&shared->tree, &shared->sentinel, insert_entry);
    ngx_queue_init(&shared->lru);
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
        LocalEntry *entry = take_entry(pool, shared, ask.key);
        LocalCount count = entry != nullptr ? entry->count : LocalCount{0, 0};

        ask.status = local_status(count, ask.share, ask.window_ms, now_ms,
                                  ask.cost);
        fits &= ask.status.fits || !ask.enforced;
    }

    // Taken again: making one ask's entry may have evicted another's.
    for (ngx_uint_t i = 0; fits && i < n; i++) {
        LocalEntry *entry = take_entry(pool, shared, asks[i].key);

        if (entry != nullptr) {
            local_add(&entry->count, asks[i].window_ms, now_ms,
                      asks[i].cost);
        }
    }

    ngx_shmtx_unlock(&pool->mutex);
    return fits;
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
