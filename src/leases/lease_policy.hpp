// Sizing of quota leases: pure functions of what a server has seen of one
// subject of one rate zone.  Units are the zone's (requests, or a cost's
// units); times are milliseconds; a rate is units per millisecond.
//
// A server asks for
//     size = clamp(ceil(rate * horizon), 1, cap)
//     cap  = floor(remaining / (k * servers)),  remaining = limit - fleet_used
// where rate is its own observed rate for the subject (rate_observe()),
// horizon = lifetime_ms + renew_rtts * rtt_ms (the time a lease should last
// above its low-water mark, plus the renewal's margin), fleet_used what
// Redis's last reply for the subject said the fleet had counted in the
// window, and servers the live servers.  cap < 1 is exact mode: no lease,
// every request asks Redis.
//
// Since every lease a server holds, with the renewal it has in flight, is
// at most the cap of its last ask (lease_ledger.hpp), and a cap is at most
// floor(limit / (k * servers)), the units the fleet's leases hold at any
// time are at most  servers * floor(limit / (k * servers)) <= limit / k.
// README.md states the whole bound.
#pragma once

#include <cstdint>

namespace ratelimit {

struct LeaseParams {
    // k: a server holds at most 1/(k * servers) of what remains.
    std::uint64_t share_k = 8;
    // The time a lease should last above its low-water mark, ms: the
    // larger, the fewer Redis calls, the more units a slowing server holds.
    std::uint64_t lifetime_ms = 500;
    // The low-water mark: the units the rate uses in this many round trips.
    std::uint64_t renew_rtts = 2;
    // A subject without a request for this long gives its units back, ms.
    std::uint64_t idle_ms = 1000;
    // The rate estimate's time constant, ms (rate_observe()).
    std::uint64_t rate_tau_ms = 1000;
    // The least a lease must be expected to use (rate * horizon, units)
    // for the server to lease at all: a lease costs Redis a grant and,
    // when its bucket ends or its subject goes quiet, a give-back, each as
    // dear as an exact request; a subject that makes a few requests in a
    // lease's life saves nothing by it.  Below it: exact mode.
    double min_demand = 4;
    // The round trip assumed before one is measured, ms.
    double initial_rtt_ms = 1;
    // A lease dies this long before the end its grant gives, ms: Redis
    // counts left_ms from its clock in whole ms, and this server's clock
    // reads whole ms, so a lease kept to the last ms could admit up to
    // 1 ms into the next bucket.  1 is enough for clocks read afresh; a
    // caller whose clock may lag (nginx's cached time) adds the lag.
    std::uint64_t guard_ms = 1;
};

// The rate estimate after `cost` units arrive `elapsed_ms` after the last
// arrival: an exponentially decayed sum of the units divided by tau,
//     rate' = rate * exp(-elapsed / tau) + cost / tau,
// whose mean under a steady rate of r units/ms is r.  units/ms.
double rate_observe(double rate, std::uint64_t elapsed_ms,
                    std::uint64_t cost, std::uint64_t tau_ms);

// The rate estimate `elapsed_ms` after the last arrival, with none since.
double rate_decayed(double rate, std::uint64_t elapsed_ms,
                    std::uint64_t tau_ms);

// The round-trip estimate after a sample: an average of weight 1/8 that
// takes a larger sample at once, so that a slower Redis raises the
// low-water mark before the leases run dry.  ms.
double rtt_observe(double rtt_ms, double sample_ms);

// floor(remaining / (k * servers)), remaining = limit - fleet_used (0 if
// the fleet has used it all); servers 0 counts as 1.  0 means exact mode.
std::uint64_t lease_cap(std::uint64_t limit, std::uint64_t fleet_used,
                        std::uint64_t servers, std::uint64_t share_k);

// horizon = lifetime_ms + renew_rtts * rtt_ms.
double lease_horizon_ms(const LeaseParams &params, double rtt_ms);

// clamp(ceil(rate * horizon), 1, cap); 0 when cap is 0 or the rate
// expects fewer than min_demand units in the horizon.
std::uint64_t lease_size(double rate, double horizon_ms, std::uint64_t cap,
                         double min_demand);

// The low-water mark: ceil(rate * renew_rtts * rtt), below `size` (so that
// a renewal asked at the mark asks for at least one unit); 0 when size is 0.
std::uint64_t lease_low_water(double rate, const LeaseParams &params,
                              double rtt_ms, std::uint64_t size);

}  // namespace ratelimit
