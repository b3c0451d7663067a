#include "batch_decider.hpp"

#include <algorithm>

#include "protocol/batch_protocol.hpp"

namespace ratelimit {

namespace {

bool text_is(const FieldValue &value, const char *text)
{
    return value.present() && value.text == text;
}

// Whether a request of `cost` units does not fit in a zone that holds
// `count` (a GCRA zone: whose backlog is `count` us): a cost of 0 checks
// whether one unit would.
bool over_limit(double count, double cost, const ZoneParams &zone)
{
    if (zone.gcra != 0) {
        return gcra_over(count, cost, zone);
    }

    return count + std::max(cost, 1.0) > zone.limit;
}

}  // namespace

BatchDecider::BatchDecider(const BatchCall &call, HashCalls *redis)
    : call_(call), redis_(*redis), window_(redis),
      gcra_(redis, call.now_us), settler_(&window_, redis)
{
    reply_.assign(call.reply_size, ReplyElement{0, nullptr});
    reply_[0].value = call.now_ms;
}

// The script's main loop: run() takes what it can, careful() the rest, and
// a request that raised in run() is decided afresh by careful(nil).
void BatchDecider::run()
{
    for (const Entry &entry : call_.entries) {
        if (!entry.solo || !fast(entry)) {
            careful(entry, nullptr);
        }

        redis_.release();
    }
}

// run() for one request.  False where the script's run() raised, having
// written nothing (or in the one write that failed).
bool BatchDecider::fast(const Entry &entry)
{
    const ZoneParams &zone = call_.zones[static_cast<unsigned char>(
        entry.zones[0])];
    if (zone.gcra != 0) {
        return fast_gcra(zone);
    }

    redis::String *key = call_.keys[k_];
    const char *field = zone.bucket_field;
    FieldValue h[4];
    double count, oldest;
    bool take = true, same;

    if (zone.fixed) {
        static const char *const kFields[] = {"t", "n"};

        if (redis_.hmget(key, kFields, 2, h) != nullptr) {
            return false;
        }

        same = text_is(h[1], field);

        if (same) {
            if (!field_number(h[0], &count)) {
                return false;
            }
            oldest = zone.bucket;
        } else {
            count = oldest = 0;
            take = !(h[0].present() || h[1].present());
        }
    } else {
        const char *const fields[] = {"t", "o", "n", field};

        if (redis_.hmget(key, fields, 4, h) != nullptr) {
            return false;
        }

        if (h[2].present()) {
            if (!field_number(h[0], &count) || !field_number(h[1], &oldest)) {
                return false;
            }

            same = text_is(h[2], field);

            if (!same) {
                double newest;

                if (!field_number(h[2], &newest)) {
                    return false;
                }

                same = newest == zone.bucket;
                take = newest <= zone.bucket && newest >= zone.first_bucket;
            }

            take = take && oldest >= zone.first_bucket;
        } else {
            count = oldest = 0;
            same = false;
            take = !(h[0].present() || h[1].present());
        }
    }

    if (!take) {
        careful(entry, h);
        return true;
    }

    std::size_t r = r_;

    if (count + 1 > zone.limit) {
        set(r, zone.enforce ? 1 : 0);
        set(r + 1, count);
        set(r + 2, oldest);
        set(r + 3, 1);
        k_++;
        r_ += 1 + kRepliesPerZone;
        return true;
    }

    char total[lua::kMaxText], text[lua::kMaxText];
    lua::format(count + 1, total);
    CallError failed;

    if (same && zone.fixed) {
        const char *const pairs[] = {"t", total};
        failed = redis_.hset(key, pairs, 1);
    } else if (same) {
        double here;

        if (!field_number(h[3], &here)) {
            return false;
        }

        lua::format(here + 1, text);
        const char *const pairs[] = {field, text, "t", total};
        failed = redis_.hset(key, pairs, 2);
    } else {
        if (oldest == 0) {
            oldest = zone.bucket;
        }

        if (zone.fixed) {
            const char *const pairs[] = {"t", total, "n", field};
            failed = redis_.hset(key, pairs, 2);
        } else {
            lua::format(oldest, text);
            const char *const pairs[] = {field, "1", "t", total,
                                         "o", text, "n", field};
            failed = redis_.hset(key, pairs, 4);
        }
    }

    if (failed != nullptr) {
        return false;
    }

    set(r, 0);
    set(r + 1, count + 1);
    set(r + 2, oldest);
    set(r + 3, 0);

    // PEXPIREAT goes through redis.pcall(): its error is the request's.
    if (!same) {
        if (CallError error = redis_.pexpireat(key, zone.expire_at)) {
            reply_[r] = {0, error};
            set(r + 1, 0);
            set(r + 2, 0);
            set(r + 3, 0);
        }
    }

    k_++;
    r_ += 1 + kRepliesPerZone;
    return true;
}

// The script's run_gcra(): a counted request of one GCRA zone, its TAT
// read and, if it fits, moved a turn.
bool BatchDecider::fast_gcra(const ZoneParams &zone)
{
    redis::String *key = call_.keys[k_];
    double ahead;

    if (gcra_.read_fast(key, &ahead) != nullptr) {
        return false;
    }

    bool over = gcra_over(ahead, 1, zone);

    if (!over && gcra_.set_tat(key, zone, ahead + zone.gcra) != nullptr) {
        return false;
    }

    set(r_, over && zone.enforce ? 1 : 0);
    set(r_ + 1, round_half_up(over ? ahead : ahead + zone.gcra));
    set(r_ + 2, 0);
    set(r_ + 3, over ? 1 : 0);
    k_++;
    r_ += 1 + kRepliesPerZone;
    return true;
}

CallError BatchDecider::read_zone(redis::String *key, const ZoneParams &zone,
                                  const FieldValue *read, ZoneRead *z)
{
    if (zone.gcra != 0) {
        return gcra_.read_zone(key, &z->count);
    }

    return window_.read_zone(key, zone, read, z);
}

CallError BatchDecider::write_zone(redis::String *key, const ZoneParams &zone,
                                   double add, ZoneRead *z, double *count,
                                   double *oldest)
{
    if (zone.gcra != 0) {
        *oldest = 0;
        return gcra_.write_zone(key, zone, add, z->count, count);
    }

    return window_.write_zone(key, zone, add, z, count, oldest);
}

void BatchDecider::careful(const Entry &entry, const FieldValue *read)
{
    if (CallError error = decide(k_, entry, r_, read)) {
        reply_[r_] = {0, error};

        for (std::size_t j = r_ + 1; j < r_ + entry.reply_size(); j++) {
            set(j, 0);
        }
    }

    k_ += entry.keys();
    r_ += entry.reply_size();
}

CallError BatchDecider::decide(std::size_t k, const Entry &entry,
                               std::size_t r, const FieldValue *read)
{
    if (entry.error != nullptr) {
        return entry.error;
    }

    if (entry.mode == kEntryInterval) {
        return peek_interval(k, entry, r);
    }

    if (entry.mode == kEntrySettle) {
        return settle(k, entry, r);
    }

    if (entry.mode == kEntryLease) {
        return lease(k, entry, r);
    }

    return decide_zones(k, entry, r, read);
}

// A settle (settle.hpp; a GCRA zone's: zone_gcra.hpp), answered with 0
// (never rejected), the zone's count and oldest bucket after it (a GCRA
// zone's backlog in us, and 0), and the units (turns) it applied.
CallError BatchDecider::settle(std::size_t k, const Entry &entry,
                               std::size_t r)
{
    const ZoneParams &zone = call_.zones[static_cast<unsigned char>(
        entry.zones[0])];
    redis::String *key = call_.keys[k];
    double count, oldest = 0, applied;
    CallError error =
        zone.gcra != 0
            ? gcra_.settle(key, zone, entry.delta, &count, &applied)
            : settler_.settle(key, zone, entry.delta, entry.at, &count,
                              &oldest, &applied);

    if (error != nullptr) {
        return error;
    }

    set(r, 0);
    set(r + 1, count);
    set(r + 2, oldest);
    set(r + 3, applied);
    return nullptr;
}

// A lease of an enforced window zone (its errors are the entry's, found
// as it was parsed): g = min(asked, max(limit - count, 0)) units granted
// and counted as a cost of g.  Answered as decide_one() answers, but
// refused (1) only where units were asked and none granted, and then g.
CallError BatchDecider::lease(std::size_t k, const Entry &entry,
                              std::size_t r)
{
    const ZoneParams &zone = call_.zones[static_cast<unsigned char>(
        entry.zones[0])];
    reads_.resize(std::max<std::size_t>(reads_.size(), 1));
    ZoneRead &z = reads_[0];

    if (CallError error = window_.read_zone(call_.keys[k], zone, nullptr,
                                            &z))
    {
        return error;
    }

    double granted = std::min(entry.asked,
                              std::max(zone.limit - z.count, 0.0));
    bool over = over_limit(z.count, entry.asked, zone);
    double count, oldest;

    if (CallError error = window_.write_zone(call_.keys[k], zone, granted,
                                             &z, &count, &oldest))
    {
        return error;
    }

    set(r, granted == 0 && entry.asked > 0 ? 1 : 0);
    set(r + 1, count);
    set(r + 2, oldest);
    set(r + 3, over ? 1 : 0);
    set(r + 4, granted);
    return nullptr;
}

// "c", "w", "p" and, its first part, "i".
CallError BatchDecider::decide_zones(std::size_t k, const Entry &entry,
                                     std::size_t r, const FieldValue *read)
{
    std::string_view zones = entry.zones;
    std::size_t n = zones.size();
    bool counting = entry.mode == kEntryCount || entry.mode == kEntryCosts;
    reads_.resize(std::max(reads_.size(), n));

    if (n == 1) {
        return decide_one(k, entry, counting, r, read);
    }

    bool rejected = false;

    for (std::size_t i = 0; i < n; i++) {
        const ZoneParams &zone = call_.zones[static_cast<unsigned char>(
            zones[i])];

        if (CallError error = read_zone(call_.keys[k + i], zone, nullptr,
                                        &reads_[i]))
        {
            return error;
        }

        if (over_limit(reads_[i].count, entry.cost(i), zone) && zone.enforce) {
            rejected = true;
        }
    }

    set(r, rejected ? 1 : 0);

    for (std::size_t i = 0; i < n; i++) {
        const ZoneParams &zone = call_.zones[static_cast<unsigned char>(
            zones[i])];
        double cost = entry.cost(i);
        bool over = over_limit(reads_[i].count, cost, zone);
        std::size_t q = r + kRepliesPerZone * i + 1;
        double count, oldest;

        if (CallError error = write_zone(
                call_.keys[k + i], zone,
                counting && !rejected && !over ? cost : 0, &reads_[i],
                &count, &oldest))
        {
            return error;
        }

        set(q, count);
        set(q + 1, oldest);
        set(q + 2, over ? 1 : 0);
    }

    return nullptr;
}

// decide_zones() of a request of one zone: nothing to hold while others
// are read.
CallError BatchDecider::decide_one(std::size_t k, const Entry &entry,
                                   bool counting, std::size_t r,
                                   const FieldValue *read)
{
    const ZoneParams &zone = call_.zones[static_cast<unsigned char>(
        entry.zones[0])];
    ZoneRead &z = reads_[0];

    if (CallError error = read_zone(call_.keys[k], zone, read, &z)) {
        return error;
    }

    double cost = entry.cost(0);
    bool over = over_limit(z.count, cost, zone);
    set(r, over && zone.enforce ? 1 : 0);
    double count, oldest;

    if (CallError error = write_zone(call_.keys[k], zone,
                                     counting && !over ? cost : 0, &z,
                                     &count, &oldest))
    {
        return error;
    }

    set(r + 1, count);
    set(r + 2, oldest);
    set(r + 3, over ? 1 : 0);
    return nullptr;
}

CallError BatchDecider::peek_interval(std::size_t k, const Entry &entry,
                                      std::size_t r)
{
    std::size_t n = entry.zones.size();

    if (CallError error = decide_zones(k, entry, r, nullptr)) {
        return error;
    }

    for (std::size_t i = 0; i < n; i++) {
        const ZoneParams &zone = call_.zones[static_cast<unsigned char>(
            entry.zones[i])];
        double count;

        if (zone.gcra != 0) {
            count = 0;
        } else if (zone.fixed) {
            count = reply_[r + kRepliesPerZone * i + 1].value;
        } else if (CallError error = window_.count_newest(
                       call_.keys[k + i], zone, entry.wanted[i], &count))
        {
            return error;
        }

        set(r + kRepliesPerZone * n + 1 + i, count);
    }

    return nullptr;
}

}  // namespace ratelimit
