// One zone's window in its key, read and written back as the window script
// does: each function here is the script's function of the same name
// (src/scripts/window_script.cpp), made of the same Redis commands in the
// same order.  Used by every entry of a call: the requests (BatchDecider)
// and the settles.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "batch_call.hpp"
#include "hash_calls.hpp"

namespace ratelimit {

// What read_zone() returns.
struct ZoneRead {
    double count, oldest, newest, here, current;
    bool slid;                       // the script's `gone` is a table
    std::vector<std::string> gone;   // fields to delete
    char field[lua::kMaxText];       // `current` as text
};

// tonumber() of a field: false for nil too.
bool field_number(const FieldValue &value, double *out);

class ZoneWindow {
public:
    explicit ZoneWindow(HashCalls *redis) : redis_(*redis) {}

    CallError read_zone(redis::String *key, const ZoneParams &zone,
                        const FieldValue *read, ZoneRead *z);

    // Counts `add` units (a request's cost, 0 for none) in the current
    // bucket, after deleting those the window slid past.
    CallError write_zone(redis::String *key, const ZoneParams &zone,
                         double add, ZoneRead *z, double *count,
                         double *oldest);

    CallError drop(redis::String *key, const std::vector<std::string> &ids);
    CallError count_newest(redis::String *key, const ZoneParams &zone,
                           double wanted, double *count);

private:
    // The script raises a Lua error where a bucket it subtracts is not a
    // number; its text names a line of the script, this one does not.
    static const char kNotANumber[];

    CallError slide(redis::String *key, double first, ZoneRead *z);

    HashCalls &redis_;
    std::vector<std::pair<std::string, std::string>> all_;  // HGETALL's
};

}  // namespace ratelimit
