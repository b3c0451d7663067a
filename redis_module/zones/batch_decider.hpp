// Decides a call as the window script does, request by request in their
// order, into the script's flat reply.  Each function here is the script's
// function of the same name (scripts/window_script.cpp), made of the same
// Redis commands in the same order, so that every hash, error and write the
// script leaves, this leaves too; the comments here say only where C++ must
// do what Lua did implicitly.  A zone's key is read and written back by its
// kind (zone_kind.hpp), which kind() alone chooses.  A side zone's
// overrides and bans (side_value.hpp) are read where its marker key
// exists, each side key once a call, applied to each use of the zone in
// force, and told after the last request's reply; a banning zone's
// refusal bans its subject (ban()), and its side keys are read from then
// on.
#pragma once

#include <cstddef>
#include <string_view>
#include <unordered_map>
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

    // What a side key holds in force: an override, a ban's end (0: none),
    // whether this entry set the ban (told once), and whether it set it
    // where its zone read no side keys before (its override, not applied
    // to the entry, is not told).
    struct Held {
        Override o;
        double ban_end;
        bool set;
        bool unread;
    };

    ZoneKind &kind(const ZoneParams &zone);
    void read_markers();
    Held &side_value(std::size_t d, KeyNumber key);
    bool apply(const Entry &entry);
    CallError ban(std::size_t d, KeyNumber key);
    CallError ban_if(const Entry &entry, std::size_t i, KeyNumber key,
                     bool counting, bool over);
    void tell(std::size_t number, const Entry &entry);
    void tell_item(std::size_t number, std::size_t i, double a, double b,
                   double left);
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
    std::vector<bool> reading_;    // by zone: it reads its side keys
    std::vector<KeyNumber> marker_;  // by side zone of a marked call
    // What the side keys read hold, by count key name (the script's
    // side_value() caches by the count key alone, whatever zone asks),
    // and the tail told.
    std::unordered_map<std::string_view, Held> got_;
    std::vector<ReplyElement> told_;
    // A request's zones as it applies them: the call's, or copies under
    // their subject's override (derived_, as many as the request's zones).
    std::vector<const ZoneParams *> applied_;
    std::vector<ZoneParams> derived_;
    std::size_t k_ = 0;            // the next request's first key,
    std::size_t r_ = 1;            // its reply's first element
};

}  // namespace ratelimit
