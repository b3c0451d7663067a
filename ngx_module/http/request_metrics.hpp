// A main request's passage through its zones, told to the metrics: the
// decision of each rate zone once known, and, at the log phase, the end of
// the requests the zones let through.
#pragma once

#include "request/request_state.hpp"

namespace ratelimit {

// The request's result, in each of its rate zones.  Not for a peek.
void record_request_decision(RequestState *state) noexcept;

// The request leaves the rate zones that let it through (it was counted
// as busy in them): at the log phase, or when a concurrency zone asked
// after them refuses it.  Nothing the second time.
void record_request_left(RequestState *state) noexcept;

// Adds the log phase handler, if some location has `ratelimit_metrics`.
ngx_int_t install_request_log_handler(ngx_conf_t *cf) noexcept;

}  // namespace ratelimit
