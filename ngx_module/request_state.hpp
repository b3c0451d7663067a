// What the module knows about one main request: the zones it was sent to
// Redis for, and the verdict.  It lives in a cleanup of the request's pool,
// found again through that cleanup's handler, because internal redirects
// (error_page, try_files) wipe module contexts and the request must be
// decided once, not once per location it passes through.
#pragma once

#include "ratelimit_conf.hpp"
#include "verdict.hpp"

namespace ratelimit {

struct Pending;

enum class Result {
    kNone,            // no zone applied (every key was empty)
    kPassed,
    kRejected,
    kRejectedDryRun,
    kError,           // Redis failed, timed out or was not connected
};

struct RequestState {
    enum class Stage {
        kWaiting,  // the script call is in flight
        kDecided,  // result known; the phase handler has yet to act on it
        kDone,     // acted on: later passes through the phase let it be
    };

    ngx_http_request_t *r;
    const LocConf *lcf;      // of the location that decided the request
    Stage stage;
    Result result;
    Pending *pending;        // the in-flight call, while waiting
    ngx_event_t wake;        // the wait's timeout, or posted on the reply
    bool retried;            // the call was sent again after NOSCRIPT

    ngx_uint_t zones;
    const ZoneRef *refs[kMaxZonesPerRequest];
    ngx_str_t subjects[kMaxZonesPerRequest];

    // EVALSHA sha numkeys keys... args..., kept for one retry as EVAL.
    int argc;
    const char **argv;
    size_t *argvlen;

    Verdict verdict;
    std::uint64_t reset_epoch_s;  // Unix time at which verdict's zone resets
};

// The state of r's main request, or nullptr if none was created.
RequestState *find_state(ngx_http_request_t *r) noexcept;

// Creates the state of a main request (r == r->main); nullptr on no memory.
RequestState *create_state(ngx_http_request_t *r) noexcept;

// The reply to the request's script call, or nullptr when the connection
// failed with the call in flight.  Called from the Redis link while the
// request still waits for it; never for a request that has gone.
void on_script_reply(RequestState *state, const redisReply *reply) noexcept;

}  // namespace ratelimit
