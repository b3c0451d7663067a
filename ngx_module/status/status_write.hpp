// A write of the status API waiting for Redis: DELETE forgiving a subject
// (forgive_handler.cpp) and PUT setting its override (override_handler.cpp),
// each one call sent through the worker's ForgiveListener, whose reply
// says how many workers its message reached.
#pragma once

#include "conf/module_conf.hpp"
#include "limits/override.hpp"
#include "replies/reply.hpp"

namespace ratelimit {

// Redis answers every call, or the link hands it nullptr, so the record
// outlives a request that was answered or terminated meanwhile; it goes
// when both the reply has come and the request no longer waits for it.
// The request waits Redis's timeout at most, as every request of the
// module: past it, it is answered 503 and the late reply only frees the
// record.  The reply is acted on from the event loop (the posted `ev`),
// never from inside hiredis.
struct StatusWrite {
    ngx_http_request_t *r;   // nullptr once answered or gone
    ngx_pool_cleanup_t *cln;
    const Zone *zone;
    ngx_str_t subject;       // in r's pool: read only while r lives
    // Once Redis has done it: logs what was done, and returns the status
    // to finalize the request with.
    ngx_int_t (*done)(ngx_http_request_t *r, const StatusWrite &write);
    const char *unsure;      // the 503's text when Redis timed out
    OverrideChange change;   // a PUT's
    ngx_event_t ev{};        // the timeout, then the reply posted
    long long told = -1;     // subscribers reached; -1: no valid reply
    long long was = -1;      // a PUT's: the limit it replaced; -1: none
    bool replied = false;
};

// The rate zone ?zone= names among the location's; nullptr, and the error
// to answer 400 with in *error, if none.  The name given is not echoed:
// it is the client's text.
const Zone *read_zone(ngx_http_request_t *r, const char **error) noexcept;

// A write of request r in `zone` for `subject`, to send; nullptr on no
// memory.
StatusWrite *new_write(ngx_http_request_t *r, const Zone *zone,
                       const ngx_str_t &subject) noexcept;

// The reply handler a write's call is sent with.
void write_answered(void *data, const Reply *reply) noexcept;

// Once its call was sent (`sent`, else it could not be): waits for the
// reply; what the content handler returns.
ngx_int_t await_write(ngx_http_request_t *r, StatusWrite *write,
                      bool sent) noexcept;

}  // namespace ratelimit
