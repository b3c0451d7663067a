#include "limits/deny_cache.hpp"

#include <cstring>

namespace ratelimit {

// FNV-1a: only spreads keys over slots.  Keys chosen to collide only evict
// each other's entries, which costs Redis calls, not correctness.
std::size_t DenyCache::slot_of(std::string_view key)
{
    std::uint64_t h = 14695981039346656037ull;

    for (char c : key) {
        h ^= static_cast<unsigned char>(c);
        h *= 1099511628211ull;
    }

    return static_cast<std::size_t>(h % kSlots);
}

std::uint64_t DenyCache::denied_for(std::string_view key,
                                    std::int64_t room,
                                    std::uint64_t now_ms,
                                    std::uint64_t *reset_epoch_s,
                                    std::uint64_t *quota,
                                    bool *banned) const
{
    if (now_ms >= live_until_ms_ || key.size() > kMaxKey) {
        return 0;
    }

    const Slot &slot = slots_[slot_of(key)];

    if (slot.until_ms <= now_ms || room > slot.room || !holds(slot, key)) {
        return 0;
    }

    if (reset_epoch_s != nullptr) {
        *reset_epoch_s = slot.reset_epoch_s;
    }

    if (quota != nullptr) {
        *quota = slot.quota;
    }

    if (banned != nullptr) {
        *banned = slot.room == kBanRoom;
    }

    return slot.until_ms - now_ms;
}

bool DenyCache::holds(const Slot &slot, std::string_view key)
{
    return slot.len == key.size()
           && std::memcmp(slot.key, key.data(), key.size()) == 0;
}

void DenyCache::put_key(Slot *slot, std::string_view key)
{
    slot->len = static_cast<std::uint8_t>(key.size());
    std::memcpy(slot->key, key.data(), key.size());
}

void DenyCache::deny(std::string_view key, std::int64_t room,
                     std::uint64_t sent_ms, std::uint64_t until_ms,
                     std::uint64_t reset_epoch_s, std::uint64_t quota)
{
    if (key.size() > kMaxKey || sent_ms < remembered_from_ms_) {
        return;
    }

    Slot &slot = slots_[slot_of(key)];

    if (!holds(slot, key)) {
        slot.forgotten = false;
        put_key(&slot, key);
    } else if (slot.forgotten && sent_ms <= slot.forgotten_ms) {
        return;
    }

    if (until_ms > live_until_ms_) {
        live_until_ms_ = until_ms;
    }

    slot.until_ms = until_ms;
    slot.room = room;
    slot.reset_epoch_s = reset_epoch_s;
    slot.quota = quota;
}

void DenyCache::forget(std::string_view key, std::uint64_t now_ms)
{
    if (key.size() > kMaxKey) {
        return;
    }

    Slot &slot = slots_[slot_of(key)];
    put_key(&slot, key);
    slot.until_ms = 0;
    slot.forgotten = true;
    slot.forgotten_ms = now_ms;
}

void DenyCache::clear(std::uint64_t now_ms, bool keep_bans)
{
    live_until_ms_ = keep_bans ? live_until_ms_ : 0;
    remembered_from_ms_ = now_ms + 1;

    for (Slot &slot : slots_) {
        if (keep_bans && slot.room == kBanRoom && slot.until_ms > 0) {
            continue;
        }

        slot.until_ms = 0;
        slot.forgotten = false;
    }
}

}  // namespace ratelimit
