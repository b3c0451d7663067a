#include "zones/settle.hpp"

#include <algorithm>

#include "limits/window_rules.hpp"

namespace ratelimit {

// The zone is read as a request reads it: the window slides, a key of
// another bucket length or algorithm starts afresh, and a clock stepped
// back makes the newest bucket the current one.  Only a bucket of that
// window takes the units (a fixed window, of one bucket: only the current
// window); a settle of any other, or one that changes no count, writes what
// a peek would.
CallError Settler::settle(KeyNumber key, const ZoneParams &zone,
                          double delta, double at, double *count,
                          double *oldest, double *applied)
{
    if (CallError error = window_.read_zone(key, zone, &z_)) {
        return error;
    }

    bool inside = at <= z_.current
                  && at >= window_rules::first_bucket(z_.current, zone.span);
    double was = 0;

    if (inside && zone.fixed) {
        was = z_.count;
    } else if (inside && at == z_.current) {
        was = z_.here;
    } else if (inside && z_.whole) {
        was = PackedZone::bucket_count(z_, at);
    } else if (inside) {
        if (CallError error = bucket_count(key, at, &was)) {
            return error;
        }
    }

    double now_at = std::max(0.0, was + delta);
    *applied = inside ? now_at - was : 0;

    if (!inside || now_at == was) {
        return window_.write_zone(key, zone, 0, &z_, count, oldest);
    }

    if (z_.whole) {
        *count = z_.count + (now_at - was);
        *oldest = zone.fixed || z_.oldest == 0 || at < z_.oldest
                      ? at
                      : z_.oldest;
        return packed_.put_bucket(key, zone, &z_, at, now_at);
    }

    return zone.fixed ? settle_window(key, zone, now_at, count, oldest)
                      : settle_bucket(key, zone, at, was, now_at, count,
                                      oldest);
}

// The count of a bucket other than the current one: 0 if it has none.
CallError Settler::bucket_count(KeyNumber key, double at, double *was)
{
    char name[lua::kMaxText];
    lua::format(at, name);
    const char *const fields[] = {name};
    FieldValue value;

    if (CallError error = store_.hmget(key, fields, 1, &value)) {
        return error;
    }

    if (!field_number(value, was)) {
        *was = 0;
    }

    return nullptr;
}

// A sliding window's bucket `at` from `was` to `now_at` units.  The buckets
// the window slid past go first, as in write_zone(); a bucket given back
// to 0 keeps its field.  A bucket newer than the key's newest (or a key
// that had none) becomes the newest, and the key expires when it leaves
// the window.
CallError Settler::settle_bucket(KeyNumber key, const ZoneParams &zone,
                                 double at, double was, double now_at,
                                 double *count, double *oldest)
{
    if (z_.slid) {
        if (CallError error = window_.drop(key, z_.gone)) {
            return error;
        }
    }

    *count = z_.count + (now_at - was);
    *oldest = z_.oldest == 0 || at < z_.oldest ? at : z_.oldest;
    char name[lua::kMaxText], value[lua::kMaxText], total[lua::kMaxText],
        first[lua::kMaxText];
    lua::format(at, name);
    lua::format(now_at, value);
    lua::format(*count, total);
    lua::format(*oldest, first);
    bool newer = z_.newest < at;
    const char *const pairs[] = {name, value, "t", total,
                                 "o", first, "n", name};

    if (CallError error = store_.hset(key, pairs, newer ? 4 : 3)) {
        return error;
    }

    if (!newer) {
        return nullptr;
    }

    char expiry[lua::kMaxText];
    lua::format(window_rules::expiry_ms(at, zone.span, zone.bucket_ms),
                expiry);
    return store_.pexpireat(key, expiry);
}

// A fixed window's count, its current window's, to `now_at` units; a key
// of no window (none, or started afresh) becomes the current window's.
CallError Settler::settle_window(KeyNumber key, const ZoneParams &zone,
                                 double now_at, double *count,
                                 double *oldest)
{
    *count = now_at;
    *oldest = z_.current;
    char total[lua::kMaxText];
    lua::format(now_at, total);

    if (z_.newest == z_.current) {
        const char *const pairs[] = {"t", total};
        return store_.hset(key, pairs, 1);
    }

    const char *const pairs[] = {"t", total, "n", z_.field};

    if (CallError error = store_.hset(key, pairs, 2)) {
        return error;
    }

    char expiry[lua::kMaxText];
    lua::format(window_rules::expiry_ms(z_.current, zone.span,
                                        zone.bucket_ms),
                expiry);
    return store_.pexpireat(key, expiry);
}

}  // namespace ratelimit
