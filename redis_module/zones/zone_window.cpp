#include "zones/zone_window.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "limits/window_rules.hpp"

namespace ratelimit {

const char ZoneWindow::kNotANumber[] =
    "ERR ratelimit: a bucket field to delete holds no number";

namespace {

using window_rules::clock_stepped_back;

bool field_number(const std::string &text, double *out)
{
    return lua::to_number(text.data(), text.size(), out);
}

// The script's natural(): a whole number from 0 to 2^63, a hash's bucket
// number or count that 8 bytes hold.
bool natural(double x)
{
    return x >= 0 && x <= 0x1p63 && x == std::floor(x);
}

// The script's ahead().
double buckets_ahead(double current, bool has_newest, double newest,
                     double span)
{
    return has_newest && clock_stepped_back(current, newest, span) ? newest
                                                                    : current;
}

}  // namespace

CallError ZoneWindow::count_newest(KeyNumber key,
                                   const ZoneParams &zone, double wanted,
                                   double *count)
{
    static const char *const kNewest[] = {"n"};
    FieldValue n;
    std::string_view bytes;

    if (store_.read_layout(key, &bytes) == KeyLayout::kPacked) {
        return packed_.count_newest(bytes, zone, wanted, count);
    }

    if (CallError error = store_.hmget(key, kNewest, 1, &n)) {
        return error;
    }

    double newest;
    bool has_newest = field_number(n, &newest);
    double before = window_rules::interval_floor(
        buckets_ahead(zone.bucket, has_newest, newest, zone.span), wanted);

    if (CallError error = store_.hgetall(key, &all_)) {
        return error;
    }

    *count = 0;

    for (const auto &[name, value] : all_) {
        double id, bucket_count;

        if (field_number(name, &id) && id > before) {
            *count = *count + (field_number(value, &bucket_count) ? bucket_count
                                                            : 0);
        }
    }

    return nullptr;
}

// What the key holds is asked first (the script's GET): a hash's fields
// only then, and not at all where there is no key.
CallError ZoneWindow::read_zone(KeyNumber key, const ZoneParams &zone,
                                ZoneRead *z)
{
    static const FieldValue kNoKey[4];
    z->count = z->oldest = z->here = 0;
    z->newest = -1;  // none: bucket numbers start at 0
    z->current = zone.bucket;
    z->slid = false;
    z->gone.clear();
    z->packed.clear();
    std::memcpy(z->field, zone.bucket_field, sizeof(z->field));
    std::string_view bytes;
    z->layout = store_.read_layout(key, &bytes);
    z->whole = zone.packed || z->layout == KeyLayout::kPacked;

    if (z->layout == KeyLayout::kPacked) {
        return packed_.read_zone(key, zone, bytes, z);
    }

    if (z->layout == KeyLayout::kHash && zone.packed) {
        if (CallError error = unhashed(key, zone, &z->packed, &z->whole)) {
            return error;
        }

        if (z->whole) {
            return packed_.read_window(key, zone, z);
        }
    }

    return read_hash(key, zone,
                     z->layout == KeyLayout::kNone ? kNoKey : nullptr, z);
}

// A hash read whole into `w`, where new keys are strings: a fixed
// window's "n" and "t", a sliding one's buckets (fields named by whole
// numbers) if "t", "o" and "n" are numbers, as read_hash() wants them, and
// its total their sum.  Not `found` where it holds no bucket of natural()
// numbers, or a total above 2^63 (a hash of junk, or of other fields:
// read as a hash).
CallError ZoneWindow::unhashed(KeyNumber key, const ZoneParams &zone,
                               PackedWindow *w, bool *found)
{
    static const char *const kFixed[] = {"n", "t"};
    FieldValue h[2];
    all_.clear();

    if (zone.fixed) {
        if (CallError error = store_.hmget(key, kFixed, 2, h)) {
            return error;
        }

        all_.emplace_back(h[0].text, h[1].text);
    } else if (CallError error = store_.hgetall(key, &all_)) {
        return error;
    }

    bool t = false, o = false, n = false;
    sums_.clear();

    for (const auto &[name, value] : all_) {
        double id, count;
        bool counted = field_number(value, &count);
        t = name == "t" ? counted : t;
        o = name == "o" ? counted : o;
        n = name == "n" ? counted : n;

        if (field_number(name, &id) && natural(id) && counted
            && natural(count))
        {
            sums_[id] = sums_[id] + count;
        }
    }

    w->clear();

    for (const auto &[id, count] : sums_) {
        w->buckets.push_back({id, count});
        w->total = w->total + count;
    }

    *found = (zone.fixed || (t && o && n)) && !w->buckets.empty()
             && natural(w->total);
    return nullptr;
}

CallError ZoneWindow::read_hash(KeyNumber key, const ZoneParams &zone,
                                const FieldValue *read, ZoneRead *z)
{
    FieldValue h[4];

    if (zone.fixed) {
        static const char *const kFields[] = {"t", "n"};

        if (read != nullptr) {
            std::copy(read, read + 2, h);
        } else if (CallError error = store_.hmget(key, kFields, 2, h)) {
            return error;
        }

        double count, newest;
        bool has_newest = field_number(h[1], &newest);
        z->current = buckets_ahead(z->current, has_newest, newest, zone.span);

        if (z->current != zone.bucket) {
            lua::format(z->current, z->field);
        }

        if (has_newest && newest == z->current && field_number(h[0], &count)) {
            z->count = count;
            z->oldest = z->newest = z->current;
        } else if (h[0].present() || h[1].present()) {
            return packed_.start_afresh(key, zone, z);
        }

        return nullptr;
    }

    if (read != nullptr) {
        std::copy(read, read + 4, h);
    } else {
        const char *const fields[] = {"t", "o", "n", z->field};

        if (CallError error = store_.hmget(key, fields, 4, h)) {
            return error;
        }
    }

    double c, o, m;
    bool has_c = field_number(h[0], &c), has_o = field_number(h[1], &o),
         has_m = field_number(h[2], &m);

    if (has_m && m > z->current && clock_stepped_back(z->current, m,
                                                      zone.span))
    {
        z->current = m;
        lua::format(m, z->field);
        const char *const field[] = {z->field};

        if (CallError error = store_.hmget(key, field, 1, &h[3])) {
            return error;
        }
    }

    double first = window_rules::first_bucket(z->current, zone.span);

    if (has_c && has_o && has_m && m >= first && m <= z->current) {
        z->count = c;
        z->oldest = o;
        z->newest = m;

        if (!field_number(h[3], &z->here)) {
            z->here = 0;
        }

        if (z->oldest < first) {
            return slide(key, first, z);
        }
    } else if (h[0].present() || h[1].present() || h[2].present()) {
        return packed_.start_afresh(key, zone, z);
    }

    return nullptr;
}

CallError ZoneWindow::slide(KeyNumber key, double first, ZoneRead *z)
{
    static const double kSteps[] = {2, 14, 16, 32};
    constexpr std::size_t kMostNames = 32;
    double count = z->count, at = z->oldest;
    z->slid = true;
    z->gone.clear();

    for (double step : kSteps) {
        if (at > z->newest) {
            break;
        }

        double last = std::min(at + step - 1, z->newest);
        char names[kMostNames][lua::kMaxText];
        const char *fields[kMostNames];
        FieldValue counts[kMostNames];
        std::size_t listed = 0;

        // Lua's numeric for: id = at, at + 1, ... while id <= last.
        for (double id = at; id <= last && listed < kMostNames; id += 1) {
            lua::format(id, names[listed]);
            fields[listed] = names[listed];
            listed++;
        }

        if (listed == 0) {
            return "ERR wrong number of arguments for 'hmget' command";
        }

        if (CallError error = store_.hmget(key, fields, listed, counts)) {
            return error;
        }

        for (std::size_t j = 0; j < listed; j++) {
            if (!counts[j].present()) {
                continue;
            }

            double id = at + static_cast<double>(j + 1) - 1, bucket_count;

            if (id >= first) {
                z->count = count;
                z->oldest = id;
                return nullptr;
            }

            if (!field_number(counts[j], &bucket_count)) {
                return kNotANumber;
            }

            count = count - bucket_count;
            z->gone.emplace_back(names[j]);
        }

        at = last + 1;
    }

    // The count summed afresh from the live fields.
    z->gone.clear();
    count = 0;

    if (CallError error = store_.hgetall(key, &all_)) {
        return error;
    }

    double next = z->newest;

    for (const auto &[name, value] : all_) {
        double id, bucket_count;

        if (!field_number(name, &id)) {
            continue;
        }

        if (id < first) {
            z->gone.push_back(name);
        } else {
            count = count
                    + (field_number(value, &bucket_count) ? bucket_count : 0);

            if (id < next) {
                next = id;
            }
        }
    }

    z->count = count;
    z->oldest = next;
    return nullptr;
}

CallError ZoneWindow::drop(KeyNumber key,
                           const std::vector<std::string> &ids)
{
    constexpr std::size_t kPerCall = 256;

    for (std::size_t i = 0; i < ids.size(); i += kPerCall) {
        if (CallError error = store_.hdel(
                key, ids.data() + i, std::min(kPerCall, ids.size() - i)))
        {
            return error;
        }
    }

    return nullptr;
}

CallError ZoneWindow::write_zone(KeyNumber key, const ZoneParams &zone,
                                 double add, ZoneRead *z, double *count,
                                 double *oldest)
{
    if (z->whole) {
        return packed_.write_zone(key, zone, add, z, count, oldest);
    }

    *count = z->count;
    *oldest = z->oldest;

    if (z->slid) {
        if (CallError error = drop(key, z->gone)) {
            return error;
        }
    }

    char total[lua::kMaxText], here[lua::kMaxText], first[lua::kMaxText];
    CallError failed = nullptr;

    if (add <= 0) {
        if (z->slid) {
            lua::format(*count, total);
            lua::format(*oldest, first);
            const char *const pairs[] = {"t", total, "o", first};
            failed = store_.hset(key, pairs, 2);
        }

        return failed;
    }

    lua::format(*count + add, total);
    lua::format(z->here + add, here);

    if (z->newest == z->current && zone.fixed) {
        const char *const pairs[] = {"t", total};
        failed = store_.hset(key, pairs, 1);
    } else if (z->newest == z->current && z->slid) {
        lua::format(*oldest, first);
        const char *const pairs[] = {z->field, here, "t", total, "o", first};
        failed = store_.hset(key, pairs, 3);
    } else if (z->newest == z->current) {
        const char *const pairs[] = {z->field, here, "t", total};
        failed = store_.hset(key, pairs, 2);
    } else {
        if (*oldest == 0) {
            *oldest = z->current;
        }

        if (zone.fixed) {
            const char *const pairs[] = {"t", total, "n", z->field};
            failed = store_.hset(key, pairs, 2);
        } else {
            char added[lua::kMaxText];
            lua::format(*oldest, first);
            lua::format(add, added);
            const char *const pairs[] = {z->field, added, "t", total,
                                         "o", first, "n", z->field};
            failed = store_.hset(key, pairs, 4);
        }

        if (failed == nullptr) {
            char at[lua::kMaxText];
            lua::format(window_rules::expiry_ms(z->current, zone.span,
                                                zone.bucket_ms),
                        at);
            failed = store_.pexpireat(key, at);
        }
    }

    *count = *count + add;
    return failed;
}

}  // namespace ratelimit
