// Subjects in an nginx shared memory zone, by key: a red-black tree ordered
// by the key's CRC32, then its bytes, and a queue from the most to the
// least recently used.  Each entry is a KeyedEntry, the caller's payload (a
// fixed size per table, aligned as any object, zeroed when made), then the
// key's bytes.  The caller holds the slab pool's lock around every call.
// Used by the leases of a zone (leases/lease_table.hpp) and by the local
// counts of `ratelimit_fail local` (local/local_memory.hpp).
#pragma once

#include <string_view>

#include "common/ngx_glue.hpp"

namespace ratelimit {

struct KeyedTable {
    ngx_rbtree_t tree;
    ngx_rbtree_node_t sentinel;
    ngx_queue_t lru;                 // the most recently used first
};

struct KeyedEntry {
    ngx_rbtree_node_t node;          // node.key: the key's CRC32
    ngx_queue_t lru;
    std::uint16_t len;               // of the key
    std::uint16_t payload_size;
};

void init_keyed_table(KeyedTable *table) noexcept;

// The entry of `key`, made most recently used; nullptr if none.
KeyedEntry *find_keyed(KeyedTable *table, std::string_view key) noexcept;

// What take_keyed() does with the entries it removes to make room, each
// with `data`: `keep` (if not nullptr) may spare one, which is made most
// recently used instead, up to kMaxKept a call (past them the least
// recently used goes, kept or not); `evicted` (if not nullptr) is shown
// each before it is removed.
struct KeyedEviction {
    bool (*keep)(const KeyedEntry *entry, void *data);
    void (*evicted)(KeyedEntry *entry, void *data);
    void *data;

    static constexpr unsigned kMaxKept = 16;
};

// The entry of `key`, found or made with a zeroed payload of
// `payload_size` bytes, and made most recently used.  To make room, the
// least recently used entries are removed as `eviction` says.  nullptr if
// the key is longer than 65535 bytes, or cannot fit in the empty pool.
KeyedEntry *take_keyed(ngx_slab_pool_t *pool, KeyedTable *table,
                       std::string_view key, std::size_t payload_size,
                       const KeyedEviction &eviction) noexcept;

void remove_keyed(ngx_slab_pool_t *pool, KeyedTable *table,
                  KeyedEntry *entry) noexcept;

// The least recently used entry, and the one used just after `entry`;
// nullptr past the end.
KeyedEntry *oldest_keyed(KeyedTable *table) noexcept;
KeyedEntry *newer_keyed(KeyedTable *table, KeyedEntry *entry) noexcept;

void *keyed_payload(KeyedEntry *entry) noexcept;
std::string_view keyed_key(const KeyedEntry *entry) noexcept;

}  // namespace ratelimit
