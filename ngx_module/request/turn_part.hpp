// A main request's wait for its GCRA turn, a part of its RequestState:
// its length set by rate/ from the call's reply, the wait run by http/
// (the access handler) and read by the variables and the metrics.
#pragma once

#include "common/ngx_glue.hpp"

namespace ratelimit {

struct TurnPart {
    // Admitted by a GCRA zone with its turn still to come: the wait, the
    // longest of its GCRA zones' (gcra_wait_ms()); `delayed` once begun.
    ngx_msec_t delay_ms;
    bool delayed;
    ngx_msec_t delay_start;  // when the wait began, on nginx's clock
    bool turn_came;          // the wait ran to its end
};

}  // namespace ratelimit
