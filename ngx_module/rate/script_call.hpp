// One request's call of the window script: built from the request's zones
// and subjects, queued in the worker's batch for Redis, waited for under an
// nginx timer, and decoded into the request's state.
#pragma once

#include "rate/call_batch.hpp"
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

// Where the batcher hands the replies of the calls: each decoded into its
// request's counts, and the request decided once every part is answered.
const BatchSink &rate_reply_sink() noexcept;

}  // namespace ratelimit
