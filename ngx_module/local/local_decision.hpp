// `ratelimit_fail local` for one request: whether it is decided locally
// without asking Redis (its worker's breaker is open), and the decision
// itself, against this server's share of each zone's limit.
#pragma once

#include "request/request_state.hpp"

namespace ratelimit {

// The location fails local and the worker's breaker is open: no call.
bool deciding_locally(const RequestState *state) noexcept;

// A request Redis gave no verdict (Result::kError) under `fail local`
// gets one from this server's memory: kPassed, kRejected or
// kRejectedDryRun, with the verdict's zone, its local limit, remaining and
// reset for the headers.  Nothing is counted in Redis, nor later replayed
// there.  A request whose limit has no valid value, a peek, or one of
// another policy is left as it is.
void decide_locally(RequestState *state) noexcept;

}  // namespace ratelimit
