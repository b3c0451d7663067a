// The status API's DELETE ?zone=NAME&key=... (or &key_hex=...), where
// `ratelimit_query ... delete=on` allows it: forgives the subject in that
// rate zone.  Its key is deleted in Redis, in a zone with ban= its ban
// lifted (the side key's ban part dropped), and every worker of the fleet
// listening on the forgive channel drops the rejection or ban it remembers
// of it (rate/forgive_listener.hpp); answered 204 once Redis has done it
// all, logged at notice.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

ngx_int_t forgive_handler(ngx_http_request_t *r) noexcept;

}  // namespace ratelimit
