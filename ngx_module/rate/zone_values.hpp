// The values a rate zone takes from one request: its limit (a number, or
// the value of `limit=$NAME` or `rate=$NAME`), its cost (`cost=`) and, at
// the log phase, what it really cost (`ratelimit_settle`).
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

enum class ValueFound {
    kFound,    // *out is set
    kEmpty,    // the value is empty
    kInvalid,  // the value is none: logged, at most once a second
    kBlocked,  // a limit of 0: the zone admits none of the subject
    kError,    // nginx could not evaluate it (no memory)
};

// Evaluates the zone's limit for r, in r's pool.  kEmpty: the zone does
// not limit the request; kBlocked: it admits none of it ("0", "0r/s").  An invalid value is logged with the zone's
// name, and `outcome` (what becomes of r) after them; at most one such
// line a second per worker, whatever the zone or value.
ValueFound find_limit(ngx_http_request_t *r, const Zone &zone,
                      const char *outcome, std::uint64_t *limit) noexcept;

// The request's cost in the zone `ref` applies, 0 to 2^53 units.  An
// empty value is invalid too, and logged as one.
ValueFound find_cost(ngx_http_request_t *r, const ZoneRef &ref,
                     const char *outcome, std::uint64_t *cost) noexcept;

// What the request really cost in the settle's zone, 0 to 2^53 units;
// logged as find_limit() does.
ValueFound find_settled_units(ngx_http_request_t *r, const SettleRef &settle,
                              std::uint64_t *units) noexcept;

}  // namespace ratelimit
