// What a request reserved in the zones that counted it, adjusted after its
// decision: taken back when another part of its call rejected it, and
// settled at the log phase with what it really cost (`ratelimit_settle`).
// Both go to Redis as settles (CallBatcher::settle()), to the bucket the
// reservation went to, and never hold up the request.
#pragma once

#include "request/request_state.hpp"

namespace ratelimit {

// A request refused after some parts of its call admitted it (another
// part rejected it, or failed and the request was refused for that) was
// counted by those parts: each of their zones gives its cost back.
void take_back_reservations(RequestState *state) noexcept;

// At the log phase, once per request: for each `ratelimit_settle` of the
// location that decided it, in a zone that counted it, the difference
// between the settle's value and the cost reserved.
void settle_reservations(RequestState *state) noexcept;

}  // namespace ratelimit
