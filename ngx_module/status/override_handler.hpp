// The status API's PUT ?zone=NAME&key=...&limit=N[&ttl=SECONDS] (or
// &key_hex=...; a GCRA zone's rate=Nr/s or Nr/m in place of limit=;
// limit=default removes it), where `ratelimit_query ... override=on`
// allows it: sets or removes the subject's override of the zone's limit
// (limits/override.hpp) in its side key, which the next call of every
// server reads, and every worker drops the rejection it remembers of the
// subject (rate/forgive_listener.hpp).  Answered 204 once Redis has done
// it, logged at notice with the client's address; a bad parameter 400
// with its reason.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

ngx_int_t override_handler(ngx_http_request_t *r) noexcept;

}  // namespace ratelimit
