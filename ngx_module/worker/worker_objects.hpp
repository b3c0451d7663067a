// The objects one worker process runs with: made by the module object in
// init_process, torn down in exit_process (see ngx_http_ratelimit_module.cpp
// for the order), found here.  None outlives its process, so none outlives
// a reload.  Each pointer is nullptr where the configuration needs none:
// no `ratelimit_redis`, no location applying a zone (or, for `slots`, a
// concurrency zone), and in processes that serve no requests.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

class CallBatcher;
class DenyCache;
class ForgiveListener;
class LocalBreaker;
class RedisLink;
class PermitGate;
class TopFlusher;

struct WorkerObjects {
    RedisLink *link;       // this worker's link to Redis
    CallBatcher *calls;    // its rate zones' calls
    DenyCache *denied;     // the subjects Redis rejected, until their reset
    PermitGate *permits;     // its concurrency zones' calls and waiters
    LocalBreaker *breaker; // `ratelimit_fail local`: Redis unreachable
    // `ratelimit_query ... delete=on` somewhere: forgivings sent and heard
    ForgiveListener *forgive;
    // Some rate zone keeps its top subjects: their slices flushed to Redis
    TopFlusher *top;
    // Lines about values the configuration gives a request (a limit from a
    // variable): the same bad value would be logged by every request.
    LogThrottle value_log;
};

// This worker's objects; all nullptr before init_process and after
// exit_process.
WorkerObjects &worker_objects() noexcept;

}  // namespace ratelimit
