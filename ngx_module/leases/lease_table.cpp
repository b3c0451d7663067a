#include "leases/lease_table.hpp"

#include <cstring>

namespace ratelimit {

// In shared memory: the subjects by the hash of their key, and the same
// nodes from least to most recently used.
struct LeaseShared {
    ngx_rbtree_t tree;
    ngx_rbtree_node_t sentinel;
    ngx_queue_t lru;
};

struct LeaseNode {
    ngx_rbtree_node_t node;   // node.key: ngx_crc32_short() of the key
    ngx_queue_t lru;
    LeaseState state;
    std::uint16_t len;
    u_char key[1];
};

// In the configuration's pool; `shared` and `pool` once the shared memory
// is mapped.
struct LeaseTable {
    ngx_shm_zone_t *shm;
    ngx_slab_pool_t *pool;
    LeaseShared *shared;
};

namespace {

LeaseNode *node_of(ngx_rbtree_node_t *node)
{
    return reinterpret_cast<LeaseNode *>(node);
}

LeaseNode *node_of_lru(ngx_queue_t *q)
{
    return ngx_queue_data(q, LeaseNode, lru);
}

void insert_lease_node(ngx_rbtree_node_t *temp, ngx_rbtree_node_t *node,
                       ngx_rbtree_node_t *sentinel) noexcept
{
    for (;;) {
        ngx_rbtree_node_t **p;

        if (node->key != temp->key) {
            p = node->key < temp->key ? &temp->left : &temp->right;
        } else {
            LeaseNode *a = node_of(node);
            LeaseNode *b = node_of(temp);
            p = ngx_memn2cmp(a->key, b->key, a->len, b->len) < 0
                ? &temp->left : &temp->right;
        }

        if (*p == sentinel) {
            *p = node;
            break;
        }

        temp = *p;
    }

    node->parent = temp;
    node->left = sentinel;
    node->right = sentinel;
    ngx_rbt_red(node);
}

ngx_int_t init_lease_shm(ngx_shm_zone_t *shm, void *data) noexcept
{
    auto *table = static_cast<LeaseTable *>(shm->data);

    if (data != nullptr) {
        // A reload with the same zone: the leases go on.
        auto *old = static_cast<LeaseTable *>(data);
        table->pool = old->pool;
        table->shared = old->shared;
        return NGX_OK;
    }

    table->pool = reinterpret_cast<ngx_slab_pool_t *>(shm->shm.addr);

    if (shm->shm.exists) {
        table->shared = static_cast<LeaseShared *>(table->pool->data);
        return NGX_OK;
    }

    table->shared = static_cast<LeaseShared *>(
        ngx_slab_alloc(table->pool, sizeof(LeaseShared)));

    if (table->shared == nullptr) {
        return NGX_ERROR;
    }

    table->pool->data = table->shared;
    ngx_rbtree_init(&table->shared->tree, &table->shared->sentinel,
                    insert_lease_node);
    ngx_queue_init(&table->shared->lru);
    return NGX_OK;
}

LeaseNode *find_node(LeaseTable *table, std::string_view key,
                     std::uint32_t hash)
{
    ngx_rbtree_node_t *node = table->shared->tree.root;
    ngx_rbtree_node_t *sentinel = table->shared->tree.sentinel;

    while (node != sentinel) {
        if (hash != node->key) {
            node = hash < node->key ? node->left : node->right;
            continue;
        }

        LeaseNode *n = node_of(node);
        ngx_int_t rc = ngx_memn2cmp(
            reinterpret_cast<u_char *>(const_cast<char *>(key.data())),
            n->key, key.size(), n->len);

        if (rc == 0) {
            return n;
        }

        node = rc < 0 ? node->left : node->right;
    }

    return nullptr;
}

void remove_node(LeaseTable *table, LeaseNode *n)
{
    ngx_queue_remove(&n->lru);
    ngx_rbtree_delete(&table->shared->tree, &n->node);
    ngx_slab_free_locked(table->pool, n);
}

// Copies a node's key into `pool` for a give-back sent after the unlock.
bool copy_key(ngx_pool_t *pool, const LeaseNode *n, ngx_str_t *out)
{
    out->data = static_cast<u_char *>(ngx_pnalloc(pool, n->len));

    if (out->data == nullptr) {
        return false;
    }

    ngx_memcpy(out->data, n->key, n->len);
    out->len = n->len;
    return true;
}

// The least recently used subject makes room: what it held goes back.
bool evict_oldest(LeaseTable *table, ngx_pool_t *pool, LeaseGiveBack *out)
{
    if (ngx_queue_empty(&table->shared->lru)) {
        return false;
    }

    LeaseNode *n = node_of_lru(ngx_queue_head(&table->shared->lru));
    LeaseParams unused;
    LeaseLedger ledger(n->state, unused);

    out->units = ledger.release();

    if (out->units.units > 0 && !copy_key(pool, n, &out->key)) {
        out->units.units = 0;
    }

    remove_node(table, n);
    return true;
}

LeaseNode *add_node(LeaseTable *table, std::string_view key,
                    std::uint32_t hash, ngx_pool_t *pool,
                    LeaseGiveBack *evicted)
{
    size_t size = offsetof(LeaseNode, key) + key.size();
    auto *n = static_cast<LeaseNode *>(ngx_slab_alloc_locked(table->pool,
                                                             size));

    if (n == nullptr && evict_oldest(table, pool, evicted)) {
        n = static_cast<LeaseNode *>(ngx_slab_alloc_locked(table->pool,
                                                           size));
    }

    if (n == nullptr) {
        return nullptr;
    }

    ngx_memzero(&n->state, sizeof(LeaseState));
    n->node.key = hash;
    n->len = static_cast<std::uint16_t>(key.size());
    ngx_memcpy(n->key, key.data(), key.size());
    ngx_rbtree_insert(&table->shared->tree, &n->node);
    ngx_queue_insert_tail(&table->shared->lru, &n->lru);
    return n;
}

std::uint32_t key_hash(std::string_view key)
{
    return ngx_crc32_short(
        reinterpret_cast<u_char *>(const_cast<char *>(key.data())),
        key.size());
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
                       ngx_pool_t *pool, LeaseGiveBack *evicted) noexcept
    : table_(table)
{
    std::uint32_t hash = key_hash(key);

    evicted->units.units = 0;

    if (key.size() > 0xffff) {
        table_ = nullptr;
        return;
    }

    ngx_shmtx_lock(&table_->pool->mutex);
    LeaseNode *n = find_node(table_, key, hash);

    if (n == nullptr) {
        n = add_node(table_, key, hash, pool, evicted);
    } else {
        ngx_queue_remove(&n->lru);
        ngx_queue_insert_tail(&table_->shared->lru, &n->lru);
    }

    state_ = n != nullptr ? &n->state : nullptr;
}

LeaseEntry::LeaseEntry(LeaseTable *table, std::string_view key) noexcept
    : table_(table)
{
    ngx_shmtx_lock(&table_->pool->mutex);
    LeaseNode *n = find_node(table_, key, key_hash(key));
    state_ = n != nullptr ? &n->state : nullptr;
}

LeaseEntry::~LeaseEntry()
{
    if (table_ != nullptr) {
        ngx_shmtx_unlock(&table_->pool->mutex);
    }
}

ngx_uint_t sweep_lease_table(LeaseTable *table, const LeaseParams &params,
                             std::uint64_t now_ms, ngx_pool_t *pool,
                             LeaseGiveBack *out, ngx_uint_t max) noexcept
{
    ngx_uint_t n = 0;

    ngx_shmtx_lock(&table->pool->mutex);

    ngx_queue_t *q = ngx_queue_head(&table->shared->lru);

    while (q != ngx_queue_sentinel(&table->shared->lru) && n < max) {
        LeaseNode *node = node_of_lru(q);
        q = ngx_queue_next(q);

        LeaseLedger ledger(node->state, params);
        LeaseReturn back = ledger.expire(now_ms);

        if (back.units > 0 && copy_key(pool, node, &out[n].key)) {
            out[n++].units = back;
        }

        bool quiet = node->state.last_ms + params.idle_ms <= now_ms;

        if (quiet && ledger.units() == 0 && ledger.asked() == 0) {
            remove_node(table, node);
        } else if (!quiet) {
            // The rest were used more recently still.
            break;
        }
    }

    ngx_shmtx_unlock(&table->pool->mutex);
    return n;
}

}  // namespace ratelimit
