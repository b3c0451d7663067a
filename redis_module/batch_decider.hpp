// Decides a parsed call as the window script does, request by request in
// their order, into the script's flat reply.  Each function here is the
// script's function of the same name (src/window_script.cpp), made of the
// same Redis commands in the same order, so that every hash, error and
// write the script leaves, this leaves too; the comments here say only
// where C++ must do what Lua did implicitly.
#pragma once

#include <string>
#include <vector>

#include "batch_call.hpp"
#include "hash_calls.hpp"

namespace ratelimit {

// A number of the reply, or the error standing in its place.
struct ReplyElement {
    double value;
    const char *error;
};

class BatchDecider {
public:
    BatchDecider(const BatchCall &call, HashCalls *redis);

    void run();

    const std::vector<ReplyElement> &reply() const { return reply_; }

private:
    // What read_zone() returns.
    struct ZoneRead {
        double count, oldest, newest, here, current;
        bool slid;                       // the script's `gone` is a table
        std::vector<std::string> gone;   // fields to delete
        char field[lua::kMaxText];       // `current` as text
    };

    // The script raises a Lua error where a bucket it subtracts is not a
    // number; its text names a line of the script, this one does not.
    static const char kNotANumber[];

    bool fast(const Entry &entry);
    void careful(const Entry &entry, const FieldValue *read);
    CallError decide(std::size_t k, const Entry &entry, std::size_t r,
                     const FieldValue *read);
    CallError decide_zones(std::size_t k, bool counting,
                           std::string_view zones, std::size_t r,
                           const FieldValue *read);
    CallError peek_interval(std::size_t k, const Entry &entry,
                            std::size_t r);
    CallError count_newest(redis::String *key, const ZoneParams &zone,
                           double wanted, double *count);
    CallError read_zone(redis::String *key, const ZoneParams &zone,
                        const FieldValue *read, ZoneRead *z);
    CallError slide(redis::String *key, double first, ZoneRead *z);
    CallError write_zone(redis::String *key, const ZoneParams &zone,
                         bool counts, ZoneRead *z, double *count,
                         double *oldest);
    CallError drop(redis::String *key, const std::vector<std::string> &ids);
    void set(std::size_t r, double value) { reply_[r] = {value, nullptr}; }

    const BatchCall &call_;
    HashCalls &redis_;
    std::vector<ReplyElement> reply_;
    std::vector<ZoneRead> reads_;  // of the zones of one request
    std::vector<std::pair<std::string, std::string>> all_;  // HGETALL's
    std::size_t k_ = 0;            // the next request's first key
    std::size_t r_ = 1;            // and its reply's first element
};

}  // namespace ratelimit
