#include "zones/packed_zone.hpp"

#include <algorithm>

#include "limits/window_rules.hpp"

namespace ratelimit {

namespace {

using window_rules::clock_stepped_back;

// The bucket a request counts in, the newest of `w` or the current one.
double counted_in(const ZoneParams &zone, const PackedWindow &w)
{
    return clock_stepped_back(zone.bucket, w.newest(), zone.span)
               ? w.newest()
               : zone.bucket;
}

bool before(const PackedBucket &bucket, double id)
{
    return bucket.id < id;
}

}  // namespace

// As the hash's read_zone(): the other kind of window's string (another
// algorithm's) starts the key afresh.
CallError PackedZone::read_zone(KeyNumber key, const ZoneParams &zone,
                                std::string_view bytes, ZoneRead *z)
{
    if (!packed_read(bytes, zone.fixed, &z->packed)) {
        return packed_read(bytes, !zone.fixed, &z->packed)
                   ? start_afresh(key, zone, z)
                   : kWrongType;
    }

    return read_window(key, zone, z);
}

// A newest bucket outside the window (another bucket length's) starts the
// key afresh; the buckets the window slid past are cut from the front, in
// memory, until the write.
CallError PackedZone::read_window(KeyNumber key, const ZoneParams &zone,
                                  ZoneRead *z)
{
    PackedWindow &w = z->packed;
    double newest = w.newest();
    z->current = counted_in(zone, w);

    if (z->current != zone.bucket) {
        lua::format(z->current, z->field);
    }

    double first = window_rules::first_bucket(z->current, zone.span);

    if (newest < first || newest > z->current
        || (!zone.fixed && zone.span > kMostPackedBuckets))
    {
        return start_afresh(key, zone, z);
    }

    z->count = w.total;
    z->oldest = w.oldest();
    z->newest = newest;
    z->here = !zone.fixed && newest == z->current ? w.buckets.back().count
                                                  : 0;

    if (z->oldest < first) {
        auto live = std::lower_bound(w.buckets.begin(), w.buckets.end(),
                                     first, before);

        for (auto gone = w.buckets.begin(); gone != live; ++gone) {
            w.total = w.total - gone->count;
        }

        w.buckets.erase(w.buckets.begin(), live);
        z->slid = true;
        z->count = w.total;
        z->oldest = w.oldest();
    }

    return nullptr;
}

CallError PackedZone::start_afresh(KeyNumber key, const ZoneParams &zone,
                                   ZoneRead *z)
{
    z->layout = KeyLayout::kNone;
    z->whole = zone.packed;
    z->packed.clear();
    return store_.del(key);
}

CallError PackedZone::write_zone(KeyNumber key, const ZoneParams &zone,
                                 double add, ZoneRead *z, double *count,
                                 double *oldest)
{
    *count = z->count;
    *oldest = z->oldest;

    if (add <= 0) {
        return z->slid ? rewrite(key, zone, z) : nullptr;
    }

    if (*oldest == 0) {
        *oldest = z->current;
    }

    CallError failed = put_bucket(key, zone, z, z->current,
                                  (zone.fixed ? z->count : z->here) + add);
    *count = *count + add;
    return failed;
}

// In place where new keys are strings and the bucket is the newest of the
// string as read, nothing slid, and its width holds `value`: the bytes of
// its count and the total (a fixed window: its count) and no others.
CallError PackedZone::put_bucket(KeyNumber key, const ZoneParams &zone,
                                 ZoneRead *z, double at, double value)
{
    PackedWindow &w = z->packed;

    if (z->layout == KeyLayout::kNone) {
        w.clear();
    }

    auto it = std::lower_bound(w.buckets.begin(), w.buckets.end(), at,
                               before);
    bool found = it != w.buckets.end() && it->id == at;
    double was = found ? it->count : 0;
    w.total = w.total + (value - was);
    bool newest = found && it + 1 == w.buckets.end();

    if (found) {
        it->count = value;
    } else {
        w.buckets.insert(it, PackedBucket{at, value});
    }

    if (z->layout != KeyLayout::kPacked || !zone.packed || z->slid
        || !newest || (!zone.fixed && packed_width(value) > w.width))
    {
        return rewrite(key, zone, z);
    }

    char bytes[2 * kPackedTotal];
    std::size_t len = zone.fixed ? kPackedTotal : w.width;
    packed_put(bytes, value, len);

    if (!zone.fixed) {
        packed_put(bytes + len, w.total, kPackedTotal);
        len += kPackedTotal;
    }

    return store_.setrange(key, packed_newest_at(w, zone.fixed),
                           {bytes, len});
}

CallError PackedZone::rewrite(KeyNumber key, const ZoneParams &zone,
                              ZoneRead *z)
{
    char at_ms[lua::kMaxText];
    lua::format(window_rules::expiry_ms(z->packed.newest(), zone.span,
                                        zone.bucket_ms),
                at_ms);

    if (!zone.packed) {
        return rewrite_hash(key, zone, z->packed, at_ms);
    }

    packed_write(&z->packed, zone.fixed, &bytes_);
    return store_.set_bytes(key, bytes_, at_ms);
}

// The hash the hash's writes would have left: "t" and "n", and a sliding
// window's "o" and a field per bucket, set 256 a call once the string is
// deleted.
CallError PackedZone::rewrite_hash(KeyNumber key, const ZoneParams &zone,
                                   const PackedWindow &w, const char *at_ms)
{
    constexpr std::size_t kPairsPerCall = 256;
    std::size_t buckets = zone.fixed ? 0 : w.buckets.size();
    texts_.resize(3 + 2 * buckets);
    lua::format(w.total, texts_[0].data());
    lua::format(w.newest(), texts_[1].data());
    fields_.assign({"t", texts_[0].data(), "n", texts_[1].data()});

    if (!zone.fixed) {
        lua::format(w.oldest(), texts_[2].data());
        fields_.insert(fields_.end(), {"o", texts_[2].data()});
    }

    for (std::size_t i = 0; i < buckets; i++) {
        char *id = texts_[3 + 2 * i].data(), *count = texts_[4 + 2 * i].data();
        lua::format(w.buckets[i].id, id);
        lua::format(w.buckets[i].count, count);
        fields_.insert(fields_.end(), {id, count});
    }

    if (CallError error = store_.del(key)) {
        return error;
    }

    for (std::size_t i = 0; i < fields_.size(); i += 2 * kPairsPerCall) {
        std::size_t pairs = std::min(kPairsPerCall, (fields_.size() - i) / 2);

        if (CallError error = store_.hset(key, fields_.data() + i, pairs)) {
            return error;
        }
    }

    return store_.pexpireat(key, at_ms);
}

CallError PackedZone::count_newest(std::string_view bytes,
                                   const ZoneParams &zone, double wanted,
                                   double *count)
{
    if (!packed_read(bytes, zone.fixed, &window_)) {
        return kWrongType;
    }

    double floor = window_rules::interval_floor(counted_in(zone, window_),
                                                wanted);
    *count = 0;

    for (const PackedBucket &bucket : window_.buckets) {
        if (bucket.id > floor) {
            *count = *count + bucket.count;
        }
    }

    return nullptr;
}

double PackedZone::bucket_count(const ZoneRead &z, double at)
{
    auto it = std::lower_bound(z.packed.buckets.begin(),
                               z.packed.buckets.end(), at, before);
    return it != z.packed.buckets.end() && it->id == at ? it->count : 0;
}

}  // namespace ratelimit
