// A write of the status API waiting for Redis: DELETE forgiving a subject
// (forgive_handler.cpp) and PUT setting its override (override_handler.cpp),
// each one call sent through the worker's ForgiveListener, whose reply
// says how many workers its message reached.  What the two share is here:
// the zone and subject read, the record made, and once the call is sent,
// this worker's memory of the subject's rejection dropped and the reply
// awaited.
#pragma once

#include "conf/module_conf.hpp"
#include "limits/override.hpp"
#include "replies/reply.hpp"

namespace ratelimit {

struct StatusWrite;

// Once Redis has done a write: logs what was done, and returns the status
// to finalize the request with.
using WriteDone = ngx_int_t (*)(ngx_http_request_t *r,
                                const StatusWrite &write);

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
    ngx_str_t key;           // its count key in `zone`, in r's pool too
    WriteDone done;
    const char *unsure;      // the 503's text when Redis timed out
    OverrideChange change;   // a PUT's
    ngx_event_t ev{};        // the timeout, then the reply posted
    long long told = -1;     // subscribers reached; -1: no valid reply
    long long was = -1;      // a PUT's: the limit it replaced; -1: none
    bool replied = false;
};

// What a write's content handler does first: discards the request body
// and reads the rate zone ?zone= names among the location's and the
// subject (?key= or ?key_hex=).  The zone, or nullptr and in *rc what the
// handler returns (a 400 sent with the reason).  The zone's name given is
// not echoed: it is the client's text.
const Zone *start_write(ngx_http_request_t *r, ngx_str_t *subject,
                        ngx_int_t *rc) noexcept;

// A write of request r in `zone` for `subject`, its key made, to send:
// `done` once Redis did it, `unsure` the 503's text if Redis times out.
// nullptr on no memory or with no listener to send it through.
StatusWrite *new_write(ngx_http_request_t *r, const Zone *zone,
                       const ngx_str_t &subject, WriteDone done,
                       const char *unsure) noexcept;

// The reply handler a write's call is sent with.
void write_answered(void *data, const Reply *reply) noexcept;

// Once its call was sent (`sent`, else it could not be): drops the key's
// remembered rejection from this worker's memory at once, the other
// workers' as the call's message comes (rate/forgive_listener.hpp), and
// waits for the reply; what the content handler returns.
ngx_int_t await_write(ngx_http_request_t *r, StatusWrite *write,
                      bool sent) noexcept;

// The side key of count key `key` in `zone` (a zone with side keys), and
// its zone's marker in its slot (keys/subject_key.hpp), in r's pool; false
// on no memory.
bool side_keys(ngx_http_request_t *r, const Zone &zone, const ngx_str_t &key,
               ngx_str_t *side, ngx_str_t *marker) noexcept;

}  // namespace ratelimit
