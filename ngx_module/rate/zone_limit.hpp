// The limit a rate zone applies to one request: its number, or the value
// its `limit=$NAME` or `rate=$NAME` takes for the request.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

enum class LimitFound {
    kLimit,    // *limit is set
    kNone,     // the value is empty: the zone does not limit the request
    kInvalid,  // the value is no limit: logged, at most once a second
    kError,    // nginx could not evaluate it (no memory)
};

// Evaluates the zone's limit for r, in r's pool.  An invalid value is
// logged with the zone's name, and `outcome` (what becomes of r) after
// them; at most one such line a second per worker, whatever the zone.
LimitFound find_limit(ngx_http_request_t *r, const Zone &zone,
                      const char *outcome, std::uint64_t *limit) noexcept;

}  // namespace ratelimit
