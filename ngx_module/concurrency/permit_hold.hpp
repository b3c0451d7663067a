// A request's place in a concurrency zone: asking Redis for a permit,
// waiting in the subject's queue, holding the permit (its lease renewed)
// until the response is sent, and giving it back.  Lives in the request's
// pool; the response's last byte (release_filter.hpp) or, failing that, a
// cleanup of the pool gives the permit or the place back, so a request that
// ends in any way (answered, client gone, finalized with an error) holds
// nothing after it.  Subrequests and internal redirects keep the main
// request's pool, and with it the hold.
//
// Redis calls: one to ask; while queued, one check every kRecheckMs
// (the checks catch a lost message), one for each Pub/Sub wake-up (a hint
// that the waiter has the permit: only a check admits it) and one each time
// the worker's subscription is made again; while held, one renewal every
// third of the lease; one to give the permit or the place back.
//
// A request is the gate's waiter from its ask on, not from the answer that
// queues it: a release that reaches Redis just after the ask gives the
// permit and publishes the wake-up at once, and the message, on the
// subscription's connection, may be read before the answer on the data
// link (Redis writes its output to the client it served last first).
#pragma once

#include "request/request_state.hpp"
#include "concurrency/permit_gate.hpp"

namespace ratelimit {


enum class PermitOutcome {
    kPending,
    kAdmitted,           // had a permit at once
    kAdmittedAfterWait,  // got one from the queue
    kQueueFull,          // refused at once
    kTimedOut,           // waited queue_timeout in vain
    kDryRun,             // dry run: would have waited or been refused
    kError,              // no answer: the fail policy applies
};

struct PermitHold {
    PermitWaiter waiter;       // in the gate's waiters while queued
    RequestState *state;
    const ZoneRef *ref;
    const ConcurrencyPolicy *policy;
    PermitGate *gate;
    ngx_str_t subject;
    ngx_str_t key;           // the subject's key
    std::uint64_t seq;       // the request's number in its worker's token

    enum class Phase { kAsking, kQueued, kChecking, kHeld, kOut };
    Phase phase;
    PermitOutcome outcome;
    bool in_redis;           // Redis may hold a permit or place under the token
    bool last_buf_passed;    // the response's last buffer went out
    PermitCallRecord *call;    // the answer awaited, if any
    ngx_event_t timer;       // the answer's timeout, the next check, or
                             // the next renewal
    ngx_event_t deadline;    // queue_timeout, while queued
    ngx_event_t done;        // posted when the outcome is known
    ngx_msec_t asked_msec;
    ngx_msec_t queue_ms;     // waited in the queue, if outcome says so
    std::uint64_t handoff_us;  // the permit's release to the resumption, if
                               // it waited; else kUnknownHandoff
    std::uint64_t hinted_freed_us;  // the last wake-up's release time, us
    bool check_again;        // a wake-up or a new subscription came while
                             // the ask or a check was out
    void (*decided)(RequestState *state) noexcept;
};

constexpr std::uint64_t kUnknownHandoff = ~std::uint64_t{0};

// Waits between checks of a waiter's place: see above.
constexpr ngx_msec_t kRecheckMs = 1000;

// Asks for a permit of `ref`'s zone for `subject`.  True if the request now
// waits: `decided` runs, from an nginx event, when the outcome is known;
// false if it is known at once (state->hold->outcome, kError: not sent).
// state->hold is nullptr after a false on no memory.
bool start_permit(RequestState *state, const ZoneRef *ref,
                  const ngx_str_t &subject,
                  void (*decided)(RequestState *state) noexcept) noexcept;


// The request's response has left to its last byte: a permit it holds goes
// back now, though the request may live on (discarding a request body it
// did not read, a lingering close).  Nothing if it holds none.
void release_permit(PermitHold *hold) noexcept;

}  // namespace ratelimit
