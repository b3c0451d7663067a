// A refused request's answer: the location's status, or, for a gRPC call
// (issue 44), gRPC's own.  gRPC clients read HTTP 429 as UNAVAILABLE and
// retry at once; RESOURCE_EXHAUSTED with a pushback tells them to wait.
#pragma once

#include "request/request_state.hpp"

namespace ratelimit {

// What the access phase handler returns for a request the module refuses
// (Result::kRejected, or kError under `ratelimit_fail closed`): `status`
// (ratelimit_status, or the fail status), for nginx to answer; or, a gRPC
// call where `ratelimit_grpc` is on, NGX_DONE, the request answered and
// finalized here: HTTP 200 and trailers-only (headers with END_STREAM, no
// body), content-type the call's media type, grpc-status 8
// (RESOURCE_EXHAUSTED; 14, UNAVAILABLE, failed closed) and grpc-message
// naming the zone; the header filter adds the RateLimit headers and
// grpc-retry-pushback-ms.  Its body is discarded, as nginx's own error
// answers' are.
ngx_int_t refuse(RequestState *state, ngx_uint_t status);

}  // namespace ratelimit
