// One request's call of the window script: built from the request's zones
// and subjects, sent on the worker's Redis link, waited for under an nginx
// timer, and decoded into the request's state.
#pragma once

#include "request_state.hpp"

namespace ratelimit {

// Builds the call for state->refs and state->subjects (state->zones of
// them), counting or, with state->peek, reporting only; false on no memory.
bool build_call(ngx_http_request_t *r, RequestState *state,
                const MainConf *mcf) noexcept;

// Sends the call and arms the timeout.  True if the request now waits:
// state->resume runs when the result is in.  False if the result is known
// without waiting: kRejected for a subject this worker saw Redis reject
// and whose reset has not passed, kError if nothing could be sent.
bool send_call(RequestState *state) noexcept;

// The reply to the request's call, or nullptr when the connection failed
// with the call in flight.  Called by the Redis link, only while the
// request waits for it.
void on_script_reply(RequestState *state, const redisReply *reply) noexcept;

}  // namespace ratelimit
