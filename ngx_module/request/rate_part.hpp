// The rate zones' call of one main request, a part of its RequestState:
// written by rate/ (the call's parts, by the batcher; its time sent, by the
// script call), by status/ (a query's interval) and by http/ (when the
// zones are asked), read by rate/ and leases/.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

struct Batch;

struct RatePart {
    // The request's call, in one part per cluster slot its keys are in
    // (per master with `cross_slot`; one part elsewhere), each decided
    // atomically on its own.
    struct Part {
        Batch *batch;        // holding the part's call, while waiting
        ngx_uint_t entry;    // its place in the batch
        std::uint32_t group;  // its slot, or master: RedisLink::batch_group()
        std::uint16_t slot;   // of its first key: where it is sent
        std::uint8_t zones;  // how many of the request's zones it decides
        std::uint8_t zone[kMaxZonesPerRequest];  // their indexes
        std::uint64_t now_ms;                    // Redis time of its reply
        bool answered;       // Redis decided it: it counted, or rejected
        bool rejected;
    };

    ngx_uint_t parts;
    ngx_uint_t parts_waiting;
    Part *part;              // at most one per zone (see `refs`)
    bool part_failed;        // a part got no verdict: the request's is ERROR
    // The status API's ?interval=, in ms, 1 to the shortest window of its
    // zones, and per zone the newest buckets to count for it (in r's
    // pool); 0 and nullptr if not asked.  Only with peek.
    std::uint64_t interval_ms;
    const std::uint64_t *interval_buckets;
    ngx_msec_t sent_msec;    // when the call left, on nginx's clock
    // When the rate zones were asked, on nginx's wall clock (ms since
    // 1970): a calendar zone's call names the periods of this instant.
    std::uint64_t asked_ms;
};

}  // namespace ratelimit
