// One interface over the kinds of zone (a window, sliding or fixed; GCRA),
// each written once against the store (store/store.hpp): what a request
// reads of a zone's key, whether it fits, what it writes back, a settle of
// it, an interval peek's count and the script's fast path; each function
// the script's of the same name (scripts/window_script.cpp).  BatchDecider
// (batch_decider.hpp) is the one place that chooses a zone's kind.
#pragma once

#include <string>
#include <vector>

#include "store/store.hpp"
#include "zones/batch.hpp"
#include "zones/packed_window.hpp"

namespace ratelimit {

// A zone's key as read(): `count` what the reply carries and over() judges
// (a GCRA zone's backlog, us); the rest is a window's, `newest` -1 where
// it has no bucket (bucket 0 is one).
struct ZoneRead {
    double count, oldest, newest, here, current;
    bool slid;                       // the script's `gone` is a table
    std::vector<std::string> gone;   // fields to delete
    char field[lua::kMaxText];       // `current` as text
    KeyLayout layout;                // what the key held: kNone also for
                                     // one deleted as another zone's
    bool whole;                      // the window is in `packed` (the
                                     // script's `gone` is its p), written
                                     // back whole in the zone's layout
                                     // for new keys
    PackedWindow packed;             // a string's, or where new keys are
                                     // strings a hash's read whole; slid
};

// What the fast path (the script's run(), a counted request of one zone)
// made of a request.
struct FastDecision {
    enum Outcome {
        kDecided,  // reply[] is the request's reply
        kRaised    // not decided here: the script's run() raised or
                   // handed it to careful(), which decides it afresh
    };

    Outcome outcome = kRaised;
    double reply[4] = {0, 0, 0, 0};
};

class ZoneKind {
public:
    // Reads zone `zone` from `key` into `z`.
    virtual CallError read_zone(KeyNumber key, const ZoneParams &zone,
                                ZoneRead *z) = 0;

    // Whether a request of `cost` units does not fit in the zone read as
    // `z`: a cost of 0 checks whether one unit would.
    virtual bool over(const ZoneRead &z, double cost,
                      const ZoneParams &zone) const = 0;

    // Counts `add` units (0 for none) in the zone read as `z`; what the
    // reply carries after it into `count` and `oldest`.
    virtual CallError write_zone(KeyNumber key, const ZoneParams &zone,
                                 double add, ZoneRead *z, double *count,
                                 double *oldest) = 0;

    // Adds `delta` units (signed) to what a request counted in bucket
    // `at`; the zone's count and oldest bucket after it, and the units
    // applied.  Never rejects.
    virtual CallError settle(KeyNumber key, const ZoneParams &zone,
                             double delta, double at, double *count,
                             double *oldest, double *applied) = 0;

    // An interval peek's count of the newest `wanted` buckets, once the
    // zone was decided with `count` in it.
    virtual CallError count_newest(KeyNumber key, const ZoneParams &zone,
                                   double wanted, double count,
                                   double *out) = 0;

    // The fast path (the script's run_window(), run_gcra()) of a counted
    // request of this one zone.
    virtual void run(KeyNumber key, const ZoneParams &zone,
                     FastDecision *out) = 0;

protected:
    ~ZoneKind() = default;
};

}  // namespace ratelimit
