// A window zone's settle (the entry "s" of RATELIMIT.DECIDE; a GCRA
// zone's: zone_gcra.hpp), the window script's settle()
// (scripts/window_script.cpp) made of the same Redis commands in the
// same order: a signed number of units added after the response to the
// bucket (sliding) or window (fixed) a request was counted in, if that is
// still in the zone's window, never taking it below 0.  A settle never
// rejects.
#pragma once

#include "store/store.hpp"
#include "zones/batch.hpp"
#include "zones/packed_zone.hpp"
#include "zones/zone_kind.hpp"
#include "zones/zone_window.hpp"

namespace ratelimit {

class Settler {
public:
    Settler(ZoneWindow *window, PackedZone *packed, Store *store)
        : window_(*window), packed_(*packed), store_(*store) {}

    // Adds `delta` units to bucket `at` of `zone` in `key`; the zone's
    // count and oldest bucket after that into `count` and `oldest`, the
    // units it added (signed: fewer than `delta` where the bucket would have
    // gone below 0, 0 where it is not in the window) into `applied`.
    CallError settle(KeyNumber key, const ZoneParams &zone,
                     double delta, double at, double *count, double *oldest,
                     double *applied);

private:
    CallError bucket_count(KeyNumber key, double at, double *was);
    CallError settle_bucket(KeyNumber key, const ZoneParams &zone,
                            double at, double was, double now_at,
                            double *count, double *oldest);
    CallError settle_window(KeyNumber key, const ZoneParams &zone,
                            double now_at, double *count, double *oldest);

    ZoneWindow &window_;
    PackedZone &packed_;
    Store &store_;
    ZoneRead z_;  // the zone as read_zone() found it
};

}  // namespace ratelimit
