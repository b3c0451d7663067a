// Decides a call as the window script does, request by request in their
// order, into the script's flat reply.  Each function here is the script's
// function of the same name (scripts/window_script.cpp), made of the same
// Redis commands in the same order, so that every hash, error and write the
// script leaves, this leaves too; the comments here say only where C++ must
// do what Lua did implicitly.  A zone's key is read and written back by its
// kind (zone_kind.hpp), which kind() alone chooses.  The side keys'
// overrides (side_value.hpp) are read as the call starts and each applied
// to the zones of its request alone.
#pragma once

#include <cstddef>
#include <vector>

#include "store/store.hpp"
#include "zones/batch.hpp"
#include "zones/side_value.hpp"
#include "zones/window_kind.hpp"
#include "zones/zone_gcra.hpp"
#include "zones/zone_kind.hpp"

namespace ratelimit {

// A number of the reply, or the error standing in its place.
struct ReplyElement {
    double value;
    const char *error;
};

class BatchDecider {
public:
    // On `store`, whose KeyNumbers are the call's keys.
    BatchDecider(const Batch &call, Store *store);

    void run();

    const std::vector<ReplyElement> &reply() const { return reply_; }

private:
    // The request's zone of its byte `i` as it applies it (apply()).
    const ZoneParams &zone_of(std::size_t i) const { return *applied_[i]; }

    ZoneKind &kind(const ZoneParams &zone);
    void read_sides();
    bool apply(const Entry &entry);
    void tell(std::size_t r, const Override &o);
    bool fast();
    void careful(const Entry &entry);
    CallError decide(std::size_t k, const Entry &entry, std::size_t r);
    CallError decide_zones(std::size_t k, const Entry &entry,
                           std::size_t r);
    CallError decide_one(std::size_t k, const Entry &entry, bool counting,
                         std::size_t r);
    CallError peek_interval(std::size_t k, const Entry &entry,
                            std::size_t r);
    CallError settle(std::size_t k, const Entry &entry, std::size_t r);
    CallError lease(std::size_t k, const Entry &entry, std::size_t r);
    void set(std::size_t r, double value) { reply_[r] = {value, nullptr}; }

    const Batch &call_;
    Store &store_;
    std::vector<ReplyElement> reply_;
    WindowKind window_;
    ZoneGcra gcra_;
    std::vector<ZoneRead> reads_;  // of the zones of one request
    std::vector<Override> sides_;  // the side keys' overrides, in order
    // A request's zones as it applies them: the call's, or copies under
    // their subject's override (derived_, as many as the request's zones).
    std::vector<const ZoneParams *> applied_;
    std::vector<ZoneParams> derived_;
    std::size_t k_ = 0;            // the next request's first key,
    std::size_t r_ = 1;            // its reply's first element
    std::size_t s_ = 0;            // and its first side key's override
};

}  // namespace ratelimit
