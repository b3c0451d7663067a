// The GCRA zone kind: its key, read and written as the window script does,
// each function here the script's function of the same name
// (scripts/window_script.cpp), made of the same Redis commands in the same
// order.  The key is a string, the subject's theoretical arrival time
// (TAT) in microseconds of Redis time; what is read and written is the
// backlog `ahead`, TAT - now (us, a double, never below 0).
#pragma once

#include "store/store.hpp"
#include "zones/batch.hpp"
#include "zones/zone_kind.hpp"

namespace ratelimit {

class ZoneGcra final : public ZoneKind {
public:
    ZoneGcra(Store *store, double now_us)
        : store_(*store), now_us_(now_us) {}

    // GET under pcall: a key of another type is deleted and read as no
    // TAT.  The backlog into z->count.
    CallError read_zone(KeyNumber key, const ZoneParams &zone,
                        ZoneRead *z) override;

    // need * T > capacity * T, with 1 us of tolerance for T's rounding;
    // or limit 0, a side zone's own or an override's.
    bool over(const ZoneRead &z, double cost,
              const ZoneParams &zone) const override;

    // Moves the TAT by `add` turns (add > 0; 0 writes nothing); the backlog
    // after it, rounded, into `count`, 0 into `oldest`.
    CallError write_zone(KeyNumber key, const ZoneParams &zone, double add,
                         ZoneRead *z, double *count, double *oldest) override;

    // Moves the TAT by `delta` turns, never before now (a TAT moved back to
    // now from later is deleted); the backlog after it, rounded, into
    // `count`, the turns it moved, rounded, into `applied`.  `at` is not
    // used: a GCRA zone has no buckets.
    CallError settle(KeyNumber key, const ZoneParams &zone, double delta,
                     double at, double *count, double *oldest,
                     double *applied) override;

    // 0: a GCRA zone has no buckets to count.
    CallError count_newest(KeyNumber key, const ZoneParams &zone,
                           double wanted, double count,
                           double *out) override;

    // run_gcra(): the TAT read and, if the request fits, moved a turn.
    void run(KeyNumber key, const ZoneParams &zone,
             FastDecision *out) override;

private:
    CallError read_tat(KeyNumber key, double *ahead);

    // run_gcra()'s GET under call: a key of another type is its error.
    CallError read_fast(KeyNumber key, double *ahead);

    // SET key round(now + ahead) PXAT ceil((now + ahead) / 1000) + window.
    CallError set_tat(KeyNumber key, const ZoneParams &zone, double ahead);

    double backlog(const FieldValue &tat) const;

    Store &store_;
    double now_us_;
};

}  // namespace ratelimit
