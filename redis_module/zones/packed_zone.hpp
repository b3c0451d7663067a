// One zone's window read whole (a packed string, packed_window.hpp, or a
// hash ZoneWindow read whole where new keys are strings) and written back
// whole in the zone's layout for new keys, as the window script's packed
// functions do (scripts/lua/window.lua), with the hash's rules
// (zone_window.hpp): the window slides, a clock stepped back counts in
// the newest bucket, a key of another bucket length or kind of window
// starts afresh.  Where new keys are strings, a count in the newest bucket
// (or a fixed window's) of a string is changed in place, SETRANGE; any
// other write makes the string anew at its exact size, SET ... PXAT, and
// where new keys are hashes, the hash (DEL, HSET, PEXPIREAT), either
// expiring when its newest bucket leaves the window.  A string of neither
// kind's shape is another type's: WRONGTYPE, left alone, as a string was
// before the layout.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

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

    // The window read into z->packed from the key (z->layout), its
    // buckets that left the window cut, as read_zone() does a string's.
    CallError read_window(KeyNumber key, const ZoneParams &zone,
                          ZoneRead *z);

    // Deletes the key (another zone's, or junk): the request's write makes
    // it anew in the zone's layout for new keys.
    CallError start_afresh(KeyNumber key, const ZoneParams &zone,
                           ZoneRead *z);

    // Counts `add` units (0 for none) in the current bucket of the zone
    // read as `z` (a packed string or no key).
    CallError write_zone(KeyNumber key, const ZoneParams &zone, double add,
                         ZoneRead *z, double *count, double *oldest);

    // Bucket `at` (a fixed window: its window) of the zone read whole as
    // `z` holds `value` units, the total changed by as many.
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
    CallError rewrite_hash(KeyNumber key, const ZoneParams &zone,
                           const PackedWindow &w, const char *at_ms);

    Store &store_;
    std::string bytes_;    // a string being made
    PackedWindow window_;  // an interval peek's
    std::vector<std::array<char, lua::kMaxText>> texts_;  // a hash's
    std::vector<const char *> fields_;                    // being made
};

}  // namespace ratelimit
