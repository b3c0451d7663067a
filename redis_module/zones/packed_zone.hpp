// One zone's window in a packed string (packed_window.hpp), read and
// written back as the window script's packed functions do
// (scripts/lua/window.lua), with the hash's rules (zone_window.hpp): the
// window slides, a clock stepped back counts in the newest bucket, a key
// of another bucket length or kind of window starts afresh.  A count in
// the newest bucket (or a fixed window's) is changed in place, SETRANGE;
// any other write makes the string anew at its exact size, SET ... PXAT,
// expiring when its newest bucket leaves the window.  A string of neither
// kind's shape is another type's: WRONGTYPE, left alone, as a string was
// before the layout.
#pragma once

#include <string>
#include <string_view>

#include "store/store.hpp"
#include "zones/batch.hpp"
#include "zones/packed_window.hpp"
#include "zones/zone_kind.hpp"

namespace ratelimit {

class PackedZone {
public:
    explicit PackedZone(Store *store) : store_(*store) {}

    // `bytes` the key's string; `z` made empty by the caller.
    CallError read_zone(KeyNumber key, const ZoneParams &zone,
                        std::string_view bytes, ZoneRead *z);

    // Counts `add` units (0 for none) in the current bucket of the zone
    // read as `z` (a packed string or no key).
    CallError write_zone(KeyNumber key, const ZoneParams &zone, double add,
                         ZoneRead *z, double *count, double *oldest);

    // Bucket `at` (a fixed window: its window) of the zone read as `z`
    // holds `value` units, the total changed by as many.
    CallError put_bucket(KeyNumber key, const ZoneParams &zone, ZoneRead *z,
                         double at, double value);

    // An interval peek's count of the string `bytes`: its buckets after
    // the `wanted` newest, counted back from where a request counts.
    CallError count_newest(std::string_view bytes, const ZoneParams &zone,
                           double wanted, double *count);

    // The count of bucket `at` in the zone read as `z`: 0 if none.
    static double bucket_count(const ZoneRead &z, double at);

private:
    CallError rewrite(KeyNumber key, const ZoneParams &zone, ZoneRead *z);

    Store &store_;
    std::string bytes_;    // a string being made
    PackedWindow window_;  // an interval peek's
};

}  // namespace ratelimit
