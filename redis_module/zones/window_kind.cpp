#include "zones/window_kind.hpp"

#include <algorithm>

namespace ratelimit {

namespace {

bool text_is(const FieldValue &value, const char *text)
{
    return value.present() && value.text == text;
}

void decided(FastDecision *out, double rejected, double count, double oldest,
             double over)
{
    out->outcome = FastDecision::kDecided;
    out->reply[0] = rejected;
    out->reply[1] = count;
    out->reply[2] = oldest;
    out->reply[3] = over;
}

}  // namespace

bool WindowKind::over(const ZoneRead &z, double cost,
                      const ZoneParams &zone) const
{
    // As the script: what is left against the cost, exact to 2^53 where
    // count + cost would round (1 + 2^53 is 2^53 in a double).
    return std::max(cost, 1.0) > zone.limit - z.count;
}

CallError WindowKind::count_newest(KeyNumber key, const ZoneParams &zone,
                                   double wanted, double count, double *out)
{
    if (zone.fixed) {
        *out = count;
        return nullptr;
    }

    return window_.count_newest(key, zone, wanted, out);
}

void WindowKind::run(KeyNumber key, const ZoneParams &zone,
                     FastDecision *out)
{
    const char *field = zone.bucket_field;
    FieldValue *h = out->read;
    double count, oldest;
    bool take = true, same;
    out->outcome = FastDecision::kRaised;
    std::string_view bytes;
    KeyLayout layout = store_.read_layout(key, &bytes);

    if (layout == KeyLayout::kPacked
        || (layout == KeyLayout::kNone && zone.packed))
    {
        out->outcome = FastDecision::kCareful;
        out->packed = true;
        return;
    }

    if (zone.fixed) {
        static const char *const kFields[] = {"t", "n"};

        if (store_.hmget(key, kFields, 2, h) != nullptr) {
            return;
        }

        same = text_is(h[1], field);

        if (same) {
            if (!field_number(h[0], &count)) {
                return;
            }
            oldest = zone.bucket;
        } else {
            count = oldest = 0;
            take = !(h[0].present() || h[1].present());
        }
    } else {
        const char *const fields[] = {"t", "o", "n", field};

        if (store_.hmget(key, fields, 4, h) != nullptr) {
            return;
        }

        if (h[2].present()) {
            if (!field_number(h[0], &count) || !field_number(h[1], &oldest)) {
                return;
            }

            same = text_is(h[2], field);

            if (!same) {
                double newest;

                if (!field_number(h[2], &newest)) {
                    return;
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
        out->outcome = FastDecision::kCareful;
        return;
    }

    if (1 > zone.limit - count) {
        decided(out, zone.enforce ? 1 : 0, count, oldest, 1);
        return;
    }

    char total[lua::kMaxText], text[lua::kMaxText];
    lua::format(count + 1, total);
    CallError failed;

    if (same && zone.fixed) {
        const char *const pairs[] = {"t", total};
        failed = store_.hset(key, pairs, 1);
    } else if (same) {
        double here;

        if (!field_number(h[3], &here)) {
            return;
        }

        lua::format(here + 1, text);
        const char *const pairs[] = {field, text, "t", total};
        failed = store_.hset(key, pairs, 2);
    } else {
        if (oldest == 0) {
            oldest = zone.bucket;
        }

        if (zone.fixed) {
            const char *const pairs[] = {"t", total, "n", field};
            failed = store_.hset(key, pairs, 2);
        } else {
            lua::format(oldest, text);
            const char *const pairs[] = {field, "1", "t", total,
                                         "o", text, "n", field};
            failed = store_.hset(key, pairs, 4);
        }
    }

    if (failed != nullptr) {
        return;
    }

    decided(out, 0, count + 1, oldest, 0);

    // PEXPIREAT goes through redis.pcall(): its error is the request's.
    if (!same) {
        if (CallError error = store_.pexpireat(key, zone.expire_at)) {
            decided(out, 0, 0, 0, 0);
            out->error = error;
        }
    }
}

}  // namespace ratelimit
