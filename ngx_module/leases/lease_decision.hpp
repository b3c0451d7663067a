// A request of a leased rate zone (`lease=SIZE`) decided on this server
// from the lease its subject holds, with no Redis call, and what those
// decisions send: a renewal before the lease runs out, the units of a dead
// lease given back.  A request the lease cannot cover goes to Redis as in
// exact mode, which is also where every rejection comes from.
//
// Only a request whose one rate zone is leased, enforced and not a peek is
// decided from a lease; a request of several rate zones is decided by
// Redis, all-or-nothing, as in exact mode.
#pragma once

#include "request/request_state.hpp"

namespace ratelimit {

// True if the lease admitted the request: state->result is kPassed, its
// count the fleet's as this server last heard it plus what it admitted
// since.  False: Redis decides it.
bool decide_from_lease(RequestState *state) noexcept;

// Redis decided a request of a leased zone: the fleet's count it said is
// the lease's news of the fleet.
void note_fleet_count(const RequestState *state) noexcept;

// A forgiving of count key `key` (rate/forgive_listener.hpp), `data` the
// MainConf: its leases forget the override they were told, until a reply
// tells it again; their units stay.
void forget_lease_override(void *data, std::string_view key) noexcept;

// This worker's sweep of its server's leases: every kLeaseSweepMs, the
// units of leases that died or went quiet go back to Redis.
ngx_int_t start_lease_sweep(ngx_cycle_t *cycle, MainConf *mcf) noexcept;
void stop_lease_sweep() noexcept;

}  // namespace ratelimit
