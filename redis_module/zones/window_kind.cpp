#include "zones/window_kind.hpp"

#include <algorithm>

namespace ratelimit {

namespace {

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
    return zone.barred || std::max(cost, 1.0) > zone.limit - z.count;
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
    std::string_view bytes;
    ZoneRead &z = fast_;
    z.layout = store_.read_layout(key, &bytes);
    z.slid = false;
    out->outcome = FastDecision::kRaised;
    PackedWindow &w = z.packed;
    bool taken = z.layout == KeyLayout::kPacked && zone.packed
                 && packed_read(bytes, zone.fixed, &w)
                 && w.newest() == zone.bucket
                 && w.oldest() > zone.bucket - zone.span;

    if (!taken && !(z.layout == KeyLayout::kNone && zone.packed)) {
        return;
    }

    double count = taken ? w.total : 0;
    double oldest = taken ? w.oldest() : zone.bucket;

    // A zone that bans leaves a refusal to the careful path, which bans.
    if (1 > zone.limit - count && zone.ban_ms > 0) {
        return;
    }

    if (1 > zone.limit - count) {
        decided(out, zone.enforce ? 1 : 0, count, oldest, 1);
        return;
    }

    double here = zone.fixed ? count : taken ? w.buckets.back().count : 0;

    if (packed_.put_bucket(key, zone, &z, zone.bucket, here + 1) == nullptr) {
        decided(out, 0, count + 1, oldest, 0);
    }
}

}  // namespace ratelimit
