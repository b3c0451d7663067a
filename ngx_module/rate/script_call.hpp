// One request's call of the window script: built from the request's zones
// and subjects, queued in the worker's batch for Redis, waited for under an
// nginx timer, and decoded into the request's state.
#pragma once

#include "request/request_state.hpp"

namespace ratelimit {

// Makes state->keys, the Redis keys of state->subjects in the zones of
// state->refs (state->zones of them), in state->r's pool; false on no
// memory.
bool build_keys(RequestState *state) noexcept;

// Queues the call, counting or, with state->peek, reporting only, and arms
// the timeout.  True if the request now waits:
// state->resume runs when the result is in.  False if the result is known
// without waiting: kRejected for a subject this worker saw Redis reject
// and whose reset has not passed, kError if nothing could be sent.
bool send_call(RequestState *state) noexcept;

// The reply of part p of the request's call, in its batch's from `reply`
// on, and the batch's Redis time.  Called only while the part waits for
// it; the request is decided once every part is answered.
void take_reply(RequestState *state, ngx_uint_t p, std::uint64_t now_ms,
                const redisReply *const *reply) noexcept;

// A part's batch got no replies: `why` and `detail` say why, for the log.
// Called only while the part waits.
void fail_call(RequestState *state, const char *why,
               std::string_view detail) noexcept;

}  // namespace ratelimit
