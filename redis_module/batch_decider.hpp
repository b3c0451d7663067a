// Decides a parsed call as the window script does, request by request in
// their order, into the script's flat reply.  Each function here is the
// script's function of the same name (src/scripts/window_script.cpp), made
// of the same Redis commands in the same order, so that every hash, error
// and write the script leaves, this leaves too; the comments here say only
// where C++ must do what Lua did implicitly.  A zone's key is read and
// written back by zone_window.hpp (a GCRA zone's by zone_gcra.hpp).
#pragma once

#include <vector>

#include "batch_call.hpp"
#include "hash_calls.hpp"
#include "settle.hpp"
#include "zone_gcra.hpp"
#include "zone_window.hpp"

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
    bool fast(const Entry &entry);
    bool fast_gcra(const ZoneParams &zone);
    void careful(const Entry &entry, const FieldValue *read);
    CallError decide(std::size_t k, const Entry &entry, std::size_t r,
                     const FieldValue *read);
    CallError decide_zones(std::size_t k, const Entry &entry, std::size_t r,
                           const FieldValue *read);
    CallError decide_one(std::size_t k, const Entry &entry, bool counting,
                         std::size_t r, const FieldValue *read);
    CallError peek_interval(std::size_t k, const Entry &entry,
                            std::size_t r);
    CallError settle(std::size_t k, const Entry &entry, std::size_t r);
    CallError lease(std::size_t k, const Entry &entry, std::size_t r);
    CallError read_zone(redis::String *key, const ZoneParams &zone,
                        const FieldValue *read, ZoneRead *z);
    CallError write_zone(redis::String *key, const ZoneParams &zone,
                         double add, ZoneRead *z, double *count,
                         double *oldest);
    void set(std::size_t r, double value) { reply_[r] = {value, nullptr}; }

    const BatchCall &call_;
    HashCalls &redis_;
    std::vector<ReplyElement> reply_;
    ZoneWindow window_;
    ZoneGcra gcra_;
    Settler settler_;
    std::vector<ZoneRead> reads_;  // of the zones of one request
    std::size_t k_ = 0;            // the next request's first key
    std::size_t r_ = 1;            // and its reply's first element
};

}  // namespace ratelimit
