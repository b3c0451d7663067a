// A main request's subject, told to its rate zones' top subjects
// (top/top_memory.hpp) once its verdict is known.
#pragma once

#include "request/request_state.hpp"

namespace ratelimit {

// Each of its rate zones that keeps its top counts the subject's request
// if Redis (or, failing it, `ratelimit_fail local`) gave a verdict, and
// its rejection in the zone that refused it.  Not for a peek.
void record_request_top(const RequestState *state) noexcept;

}  // namespace ratelimit
