#include "common/keyed_table.hpp"

#include <cstddef>

namespace ratelimit {

namespace {

// The payload starts here, aligned as any object; the key follows it.
constexpr std::size_t kPayloadOffset =
    (sizeof(KeyedEntry) + alignof(std::max_align_t) - 1)
    / alignof(std::max_align_t) * alignof(std::max_align_t);

u_char *key_of(KeyedEntry *entry)
{
    return reinterpret_cast<u_char *>(entry) + kPayloadOffset
           + entry->payload_size;
}

// nginx's functions take keys as non-const bytes, and only read them.
u_char *key_bytes(std::string_view key)
{
    return reinterpret_cast<u_char *>(const_cast<char *>(key.data()));
}

KeyedEntry *entry_of(ngx_rbtree_node_t *node)
{
    return reinterpret_cast<KeyedEntry *>(
        reinterpret_cast<u_char *>(node) - offsetof(KeyedEntry, node));
}

void insert_keyed(ngx_rbtree_node_t *temp, ngx_rbtree_node_t *node,
                  ngx_rbtree_node_t *sentinel) noexcept
{
    ngx_rbtree_node_t **p;

    for (;;) {
        if (node->key != temp->key) {
            p = node->key < temp->key ? &temp->left : &temp->right;
        } else {
            KeyedEntry *a = entry_of(node);
            KeyedEntry *b = entry_of(temp);
            p = ngx_memn2cmp(key_of(a), key_of(b), a->len, b->len) < 0
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

KeyedEntry *lookup(KeyedTable *table, std::uint32_t hash,
                   std::string_view key)
{
    ngx_rbtree_node_t *node = table->tree.root;
    ngx_rbtree_node_t *sentinel = table->tree.sentinel;

    while (node != sentinel) {
        if (hash != node->key) {
            node = hash < node->key ? node->left : node->right;
            continue;
        }

        KeyedEntry *entry = entry_of(node);
        ngx_int_t rc = ngx_memn2cmp(key_bytes(key), key_of(entry),
                                    key.size(), entry->len);

        if (rc == 0) {
            return entry;
        }

        node = rc < 0 ? node->left : node->right;
    }

    return nullptr;
}

std::uint32_t key_hash(std::string_view key)
{
    return ngx_crc32_short(key_bytes(key), key.size());
}

void use(KeyedTable *table, KeyedEntry *entry)
{
    ngx_queue_remove(&entry->lru);
    ngx_queue_insert_head(&table->lru, &entry->lru);
}

}  // namespace

void init_keyed_table(KeyedTable *table) noexcept
{
    ngx_rbtree_init(&table->tree, &table->sentinel, insert_keyed);
    ngx_queue_init(&table->lru);
}

KeyedEntry *find_keyed(KeyedTable *table, std::string_view key) noexcept
{
    KeyedEntry *entry = lookup(table, key_hash(key), key);

    if (entry != nullptr) {
        use(table, entry);
    }

    return entry;
}

KeyedEntry *take_keyed(ngx_slab_pool_t *pool, KeyedTable *table,
                       std::string_view key, std::size_t payload_size,
                       const KeyedEviction &eviction) noexcept
{
    std::uint32_t hash = key_hash(key);
    KeyedEntry *entry = lookup(table, hash, key);

    if (entry != nullptr) {
        use(table, entry);
        return entry;
    }

    if (key.size() > 0xffff || payload_size > 0xffff) {
        return nullptr;
    }

    std::size_t size = kPayloadOffset + payload_size + key.size();
    unsigned kept = 0;

    for (;;) {
        entry = static_cast<KeyedEntry *>(ngx_slab_alloc_locked(pool, size));

        if (entry != nullptr || ngx_queue_empty(&table->lru)) {
            break;
        }

        KeyedEntry *oldest = oldest_keyed(table);

        if (eviction.keep != nullptr && kept < KeyedEviction::kMaxKept
            && eviction.keep(oldest, eviction.data))
        {
            use(table, oldest);
            kept++;
            continue;
        }

        if (eviction.evicted != nullptr) {
            eviction.evicted(oldest, eviction.data);
        }

        remove_keyed(pool, table, oldest);
    }

    if (entry == nullptr) {
        return nullptr;
    }

    entry->node.key = hash;
    entry->len = static_cast<std::uint16_t>(key.size());
    entry->payload_size = static_cast<std::uint16_t>(payload_size);
    ngx_memzero(keyed_payload(entry), payload_size);
    ngx_memcpy(key_of(entry), key.data(), key.size());
    ngx_rbtree_insert(&table->tree, &entry->node);
    ngx_queue_insert_head(&table->lru, &entry->lru);
    return entry;
}

void remove_keyed(ngx_slab_pool_t *pool, KeyedTable *table,
                  KeyedEntry *entry) noexcept
{
    ngx_queue_remove(&entry->lru);
    ngx_rbtree_delete(&table->tree, &entry->node);
    ngx_slab_free_locked(pool, entry);
}

KeyedEntry *oldest_keyed(KeyedTable *table) noexcept
{
    return ngx_queue_empty(&table->lru)
           ? nullptr
           : ngx_queue_data(ngx_queue_last(&table->lru), KeyedEntry, lru);
}

KeyedEntry *newer_keyed(KeyedTable *table, KeyedEntry *entry) noexcept
{
    ngx_queue_t *q = ngx_queue_prev(&entry->lru);

    return q == ngx_queue_sentinel(&table->lru)
           ? nullptr : ngx_queue_data(q, KeyedEntry, lru);
}

void *keyed_payload(KeyedEntry *entry) noexcept
{
    return reinterpret_cast<u_char *>(entry) + kPayloadOffset;
}

std::string_view keyed_key(const KeyedEntry *entry) noexcept
{
    return {reinterpret_cast<const char *>(entry) + kPayloadOffset
                + entry->payload_size,
            entry->len};
}

}  // namespace ratelimit
