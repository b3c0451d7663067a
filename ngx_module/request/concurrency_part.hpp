// A main request's concurrency zone, a part of its RequestState: written by
// concurrency/ (its permit, a peek's report) and by http/ (a permit asked only
// after the rate zones), read by http/ (the release filter, the
// variables).
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

struct PermitHold;
struct PermitReport;

struct ConcurrencyPart {
    PermitHold *hold;          // its concurrency zone's, or nullptr
    // A concurrency zone asked only once the rate zones admitted the
    // request and its GCRA wait is over, so that a request waiting for its
    // turn holds no permit: the zone and the subject; nullptr once asked, or
    // when the location's zones never make a request wait.
    const ZoneRef *late_permit;
    ngx_str_t late_permit_subject;
    PermitReport *permit_report; // a peek's concurrency zones, or nullptr
};

}  // namespace ratelimit
