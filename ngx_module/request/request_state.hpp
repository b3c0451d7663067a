// What the module knows about one main request: the zones it was sent to
// Redis for, and the verdict.  It lives in a cleanup of the request's pool,
// found again through that cleanup's handler, because internal redirects
// (error_page, try_files) wipe module contexts and the request must be
// decided once, not once per location it passes through.  What one
// feature keeps of the request is a part of it, a base in a header of its
// own (request/*_part.hpp) that says who writes and reads it; a field has
// one name wherever it is used (state->hold).
#pragma once

#include "conf/module_conf.hpp"
#include "request/concurrency_part.hpp"
#include "request/rate_part.hpp"
#include "request/settle_part.hpp"
#include "request/turn_part.hpp"
#include "scripts/verdict.hpp"

namespace ratelimit {

enum class Result {
    kNone,            // no zone applied (every key was empty)
    kPassed,
    kRejected,
    kRejectedDryRun,
    kError,           // Redis failed, timed out or was not connected
    kPeeked,          // reported on, not counted: the status API or peek
    kInvalid,         // a zone's cost or limit had no valid value: 400
};

struct RequestState : RatePart, ConcurrencyPart, SettlePart, TurnPart {
    enum class Stage {
        kNew,      // created, nothing sent yet (the zero a new state holds)
        kWaiting,  // the script call is in flight, or the request waits
                   // for a slot of its concurrency zone
        kPermitDecided,  // the concurrency zone let it through (or failed
                       // open): the rate zones are to be asked
        kDecided,  // result known; the phase handler has yet to act on it
        kLatePermitDecided,  // the concurrency zone answered a request the
                           // rate zones had admitted (late_permit)
        kDone,     // acted on: later passes through the phase let it be
    };

    ngx_http_request_t *r;
    const LocConf *lcf;      // of the location that decided the request
    Stage stage;
    Result result;
    ngx_event_t wake;        // the wait's timeout, or posted on the reply
    bool peek;               // report the zones, count nothing
    std::uint64_t check_start_us;  // metrics: when the phase first saw it
    bool in_flight;          // metrics: let through, its zones busy
    // Goes on with the request once the result is known, from an nginx
    // event (never from inside hiredis), which runs the posted requests
    // after it.
    void (*resume)(RequestState *state) noexcept;

    // Run when the request's pool goes (the request is gone), by whoever
    // keeps a pointer to the state beyond the request: the batch that holds
    // its call forgets it.  nullptr: nobody.
    void (*release_hook)(RequestState *state) noexcept;

    // Its rate zones (concurrency zones are in `hold`).  This array and
    // every other one per zone (and RatePart's `part`) hold as many
    // entries as the location has zones, the most a request can apply, not
    // kMaxZonesPerRequest: most locations have one, and a state sized for
    // sixteen (2.5 KB) overflowed the request pool's first block and cost
    // zeroing it on every request.  In r's pool, zeroed.
    ngx_uint_t zones;
    const ZoneRef **refs;
    ngx_str_t *subjects;
    ngx_str_t *keys;         // the subjects' Redis keys
    // The limit each zone applies to this request: its own, or its
    // variable's value (Zone::limit_value).
    std::uint64_t *limits;
    // What the request costs in each zone, in units (ZoneRef::cost).
    std::uint64_t *costs;

    std::uint64_t now_ms;         // Redis time of the reply
    ZoneCount *counts;
    Verdict verdict;
    std::uint64_t reset_epoch_s;  // Unix time at which verdict's zone resets
    // Refused by a ban in force in the verdict's zone (issue 43), by Redis
    // or from the worker's memory: $ratelimit_status BANNED.
    bool banned;
    // Refused in gRPC (http/grpc_answer.cpp): HTTP 200, the refusal in
    // grpc-status, the header filter's Retry-After also in ms.
    bool grpc;
};

// Whether the request's zone i counts it and may reject it, or dry-runs.
inline bool enforced(const RequestState *state, ngx_uint_t i)
{
    return !(state->refs[i]->dry_run
             || (state->lcf != nullptr && state->lcf->dry_run));
}

// Zone i's policy in a call of the request made at wall_ms (nginx's wall
// clock): the zone's, under the request's limit and its location's burst,
// of a calendar zone in the periods of that instant; limit 0 where the
// request's value blocked the zone (http/access_handler.cpp,
// reject_blocked()).
inline Policy call_policy_of(const RequestState *state, ngx_uint_t i,
                             std::uint64_t wall_ms)
{
    Policy policy = policy_at(*state->refs[i]->zone, wall_ms);
    policy.limit = state->limits[i];
    policy.burst = state->refs[i]->query ? state->refs[i]->zone->largest_burst
                                         : state->refs[i]->burst;
    return policy;
}

// Zone i's policy as the request's call sends it: made when its zones
// were asked.
inline Policy sent_policy_of(const RequestState *state, ngx_uint_t i)
{
    return call_policy_of(state, i, state->asked_ms);
}

// Zone i's policy as it applies to the request: as sent, under the
// subject's override where Redis told of one.
inline Policy policy_of(const RequestState *state, ngx_uint_t i)
{
    return overridden(sent_policy_of(state, i), state->counts[i].override);
}

// The response went out a success: a status below 400.
inline bool response_succeeded(const ngx_http_request_t *r)
{
    ngx_uint_t status = r->headers_out.status;
    return status > 0 && status < NGX_HTTP_BAD_REQUEST;
}

// Goes on with the request from an nginx event: runs `next`, which may
// finalize it, and then the requests posted meanwhile, with the framing of
// an nginx request event handler (the connection outlives the request).
void resume_request(RequestState *state,
                    void (*next)(RequestState *state) noexcept) noexcept;

// The state of r's main request, or nullptr if none was created.
RequestState *find_state(ngx_http_request_t *r) noexcept;

// The Redis key of `subject` in `zone` (keys/subject_key.hpp: in a cluster,
// with the hash tag of the fleet's tag key), in r's pool; false on no
// memory.  A rate zone's hash; a concurrency zone's `held` and `queue` sets
// are named after it.
bool make_subject_key(ngx_http_request_t *r, const Zone &zone,
                      const ngx_str_t &subject, ngx_str_t *key) noexcept;

// Creates a state in r's pool for at most `max_zones` rate zones (at most
// kMaxZonesPerRequest); nullptr on no memory.  The state of the request's
// decision is `findable` by find_state(); a status API query is not, so
// that it can coexist with the decision of its own request.
RequestState *create_state(ngx_http_request_t *r, ngx_uint_t max_zones,
                           bool findable) noexcept;

}  // namespace ratelimit
