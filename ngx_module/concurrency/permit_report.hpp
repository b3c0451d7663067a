// A peek at a request's concurrency zones, for the status API and the peek
// header: per zone, the permits of the subject held and its waiters queued,
// across the fleet, read by the concurrency script's status call, which
// takes no permit and changes nothing but what expired.  One call per zone,
// sent together, before the rate zones' call; the first that fails, or
// finds no answer within the Redis timeout, makes the answer a 503.
// Lives in the request's pool; a cleanup of that pool leaves any answer
// still on its way with nobody to tell.
#pragma once

#include "request/request_state.hpp"

namespace ratelimit {

struct PermitCallRecord;

struct PermitReport {
    struct Entry {
        PermitReport *report;
        const ZoneRef *ref;
        ngx_str_t subject;
        ngx_str_t key;           // the subject's key
        ngx_uint_t position;     // of its object in the answer's array
        PermitCallRecord *call;    // its answer, while awaited
        std::uint64_t in_flight;
        std::uint64_t queued;
    };

    RequestState *state;
    ngx_uint_t entries;
    Entry entry[kMaxZonesPerRequest];
    ngx_uint_t waiting;          // entries whose answer is awaited
    ngx_event_t timer;           // the answers' timeout
    ngx_event_t done;            // posted when every answer is in
    void (*decided)(RequestState *state) noexcept;
};

// Adds `ref`'s zone, for `subject`, to state->permit_report (made on the
// first call), its object at `position` of the answer's array (they are
// added in the order of their positions); false on no memory.
bool add_permit_report(RequestState *state, const ZoneRef *ref,
                       const ngx_str_t &subject, ngx_uint_t position) noexcept;

// Sends the calls of state->permit_report.  True if the request now waits:
// `decided` runs, from an nginx event, once state->result is known:
// kPeeked with the counts in the report, or kError.  False if it is known
// at once: kError, nothing could be sent.
bool send_permit_report(RequestState *state,
                        void (*decided)(RequestState *state) noexcept) noexcept;

}  // namespace ratelimit
