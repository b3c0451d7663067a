// One GCRA zone's key, read and written as the window script does: each
// function here is the script's function of the same name
// (src/scripts/window_script.cpp), made of the same Redis commands in the
// same order.  The key is a string, the subject's theoretical arrival time
// (TAT) in microseconds of Redis time; what is read and written is the
// backlog `ahead`, TAT - now (us, a double, never below 0).
#pragma once

#include "batch_call.hpp"
#include "hash_calls.hpp"
#include "zone_window.hpp"

namespace ratelimit {

class ZoneGcra {
public:
    ZoneGcra(HashCalls *redis, double now_us)
        : redis_(*redis), now_us_(now_us) {}

    // GET under pcall: a key of another type is deleted and read as no TAT.
    CallError read_zone(redis::String *key, double *ahead);

    // run_gcra()'s GET under call: a key of another type is its error.
    CallError read_fast(redis::String *key, double *ahead);

    // SET key round(now + ahead) PXAT ceil((now + ahead) / 1000) + window.
    CallError set_tat(redis::String *key, const ZoneParams &zone,
                      double ahead);

    // Moves the TAT by `add` turns (add > 0; 0 writes nothing); the backlog
    // after it, rounded, into `count`.
    CallError write_zone(redis::String *key, const ZoneParams &zone,
                         double add, double ahead, double *count);

    // settle(): moves the TAT by `delta` turns, never before now (a TAT
    // moved back to now from later is deleted); the backlog after it,
    // rounded, into `after`, the turns it moved, rounded, into `applied`.
    CallError settle(redis::String *key, const ZoneParams &zone,
                     double delta, double *after, double *applied);

private:
    double backlog(const FieldValue &tat) const;

    HashCalls &redis_;
    double now_us_;
};

// Lua's math.floor(x + 0.5), the script's rounding to nearest.
double round_half_up(double x);

// Whether a request of `cost` units does not fit in GCRA zone `zone` with
// backlog `ahead`: within 1 us of the capacity still fits.
bool gcra_over(double ahead, double cost, const ZoneParams &zone);

}  // namespace ratelimit
