// The status API: `ratelimit_query` answers GET ?key=... (or ?key_hex=...)
// with the zones' JSON report of that subject, counting nothing.  The peek
// header answers with the same report through send_status().
#pragma once

#include "request/request_state.hpp"

namespace ratelimit {

ngx_int_t query_handler(ngx_http_request_t *r) noexcept;

// Sends `len` bytes of `body` (in r's pool, or static) as the whole
// response; `content_type` must outlive the request.
ngx_int_t send_body(ngx_http_request_t *r, ngx_uint_t status,
                    std::string_view content_type, u_char *body,
                    size_t len) noexcept;

// Sends {"error":"MESSAGE"} with `status`; returns what
// ngx_http_finalize_request() wants.
ngx_int_t send_error(ngx_http_request_t *r, ngx_uint_t status,
                     const char *message) noexcept;

// ?key= percent-decoded, or ?key_hex= hex-decoded, into `subject` (in r's
// pool).  Returns nullptr on success, else the error to answer 400 with.
const char *read_subject(ngx_http_request_t *r, ngx_str_t *subject) noexcept;

// The zone ?zone= names among the location's `ratelimit_query` zones;
// nullptr, and in *error the 400's text (`usage` if ?zone= is missing),
// if none.  The name given is not echoed: it is the client's text.
const Zone *query_zone(ngx_http_request_t *r, const char *usage,
                       const char **error) noexcept;

// Sends the JSON report of a peek (200), or the error if Redis failed (503);
// returns what ngx_http_finalize_request() wants.
ngx_int_t send_status(RequestState *state) noexcept;

}  // namespace ratelimit
