// One zone's window in its key, read and written back as the window script
// does: each function here is the script's function of the same name
// (scripts/window_script.cpp), made of the same Redis commands in the
// same order.  Used by every entry of a call on a window zone: the requests
// and leases (WindowKind) and the settles (Settler).  A key is written in
// the zone's layout for new keys (ZoneParams::packed): a hash is read and
// written here where new keys are hashes; a string, or a hash read whole
// where new keys are strings (unhashed()), by PackedZone
// (packed_zone.hpp), which writes it back whole in that layout.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "store/store.hpp"
#include "zones/batch.hpp"
#include "zones/packed_zone.hpp"
#include "zones/zone_kind.hpp"

namespace ratelimit {

class ZoneWindow {
public:
    ZoneWindow(Store *store, PackedZone *packed)
        : store_(*store), packed_(*packed) {}

    CallError read_zone(KeyNumber key, const ZoneParams &zone, ZoneRead *z);

    // Counts `add` units (a request's cost, 0 for none) in the current
    // bucket, after deleting those the window slid past.
    CallError write_zone(KeyNumber key, const ZoneParams &zone,
                         double add, ZoneRead *z, double *count,
                         double *oldest);

    CallError drop(KeyNumber key, const std::vector<std::string> &ids);
    CallError count_newest(KeyNumber key, const ZoneParams &zone,
                           double wanted, double *count);

private:
    // The script raises a Lua error where a bucket it subtracts is not a
    // number; its text names a line of the script, this one does not.
    static const char kNotANumber[];

    // `read`: the fields as no key answers them, or nullptr to ask.
    CallError read_hash(KeyNumber key, const ZoneParams &zone,
                        const FieldValue *read, ZoneRead *z);
    CallError unhashed(KeyNumber key, const ZoneParams &zone,
                       PackedWindow *w, bool *found);
    CallError slide(KeyNumber key, double first, ZoneRead *z);

    Store &store_;
    PackedZone &packed_;
    FieldPairs all_;                 // HGETALL's
    std::map<double, double> sums_;  // unhashed()'s buckets
};

}  // namespace ratelimit
