#include "leases/lease_decision.hpp"

#include "leases/lease_table.hpp"
#include "limits/algorithms.hpp"
#include "limits/sliding_window.hpp"
#include "local/local_memory.hpp"
#include "metrics/metrics.hpp"
#include "rate/call_batch.hpp"
#include "worker/worker_objects.hpp"

namespace ratelimit {

namespace {

// The leases' parameters (leases/lease_policy.hpp): nginx's defaults.
const LeaseParams kLeaseParams{};

// How often a worker gives back the units of dead or quiet leases, ms.
constexpr ngx_msec_t kLeaseSweepMs = 200;

// The leases' clock: monotonic, the same for every worker of the server,
// read afresh (nginx's cached time may lag a loop turn), in ms.
std::uint64_t lease_clock_ms()
{
    return metrics::now_us() / 1000;
}

// The live servers the fleet counts, for the share of a lease: as the
// server learnt them from Redis (local/local_memory.hpp); 1 until known.
std::uint64_t fleet_servers(ngx_http_request_t *r)
{
    ngx_shm_zone_t *zone = main_conf(r)->local_zone;
    ngx_uint_t servers = zone != nullptr ? local::live_servers(zone) : 0;

    return servers > 0 ? servers : 1;
}

// Gives units of `key` back to Redis: a settle of -units into their bucket.
// A settle does not depend on the limit: a zone whose limit is a variable
// is written with its policy's, a calendar zone's call in the periods of
// when it is sent (Redis applies nothing once the bucket's period has
// ended).
void give_back(const Zone &zone, std::string_view key,
               const LeaseReturn &back)
{
    CallBatcher *calls = worker_objects().calls;

    if (calls == nullptr || back.units == 0) {
        return;
    }

    Policy policy = zone.policy;
    policy.limit = ngx_max(policy.limit, 1);

    calls->settle(key, policy, -static_cast<std::int64_t>(back.units),
                  back.bucket, zone);
}

// A renewal's outcome into the lease: its units granted in the bucket of
// Redis's time (a calendar zone's, the period of the renewal's call that
// time is in), until that bucket ends.
void on_lease_renewed(const LeaseRenewal &renewal,
                      const LeaseGrant *grant) noexcept
{
    const Zone &zone = *renewal.zone;
    LeaseReturn back{0, 0};
    CountedBucket bucket{0, 0};

    if (grant != nullptr) {
        Policy policy = policy_at(zone, renewal.made_ms);
        bucket = row_of(policy).bucket_at(policy, grant->now_ms);
        back = {grant->units, bucket.number};
    }

    {
        LeaseEntry entry(zone.leases, renewal.key);

        if (entry.state() != nullptr) {
            LeaseLedger ledger(*entry.state(), kLeaseParams);

            if (grant == nullptr) {
                ledger.renewal_failed();
            } else {
                back = ledger.granted(grant->units, back.bucket, grant->count,
                                      bucket.end_ms - grant->now_ms,
                                      lease_clock_ms(), grant->override);
            }
        }
    }

    give_back(zone, renewal.key, back);
}

// The request's verdict from its lease: admitted, its zone's count the
// fleet's as this server last heard it from Redis, its limit the
// subject's override in force as Redis last told it, if any.
void admit_from_lease(RequestState *state, std::uint64_t fleet_used,
                      const Override &override)
{
    state->counts[0] = {0, 0, false, 0, override};

    Policy policy = policy_of(state, 0);
    const Policy *policies[1] = {&policy};
    bool enforcing[1] = {true};
    std::uint64_t now_ms = wall_clock_ms();

    state->counts[0].total = ngx_min(fleet_used, policy.limit);
    state->now_ms = now_ms;
    state->verdict = *decide_verdict(policies, enforcing, state->counts, 1,
                                     now_ms, false);
    state->reset_epoch_s = seconds_ceil(now_ms
                                        + state->verdict.status.reset_ms);
    state->result = Result::kPassed;
    state->stage = RequestState::Stage::kDecided;
}

// Whether the request is decided from its subject's lease: one enforced
// zone that leases, not a peek, and a limit above 0 (a limit of 0 that an
// override may lift is Redis's to decide).
bool leased(const RequestState *state)
{
    return state->zones == 1 && state->refs[0]->zone->leases != nullptr
           && !state->peek && enforced(state, 0) && state->limits[0] > 0;
}

void on_sweep(ngx_event_t *ev) noexcept;

// This worker's sweep, armed in init_process (start_lease_sweep()) and
// removed in exit_process: it lives as long as the worker process.
ngx_event_t sweep_event;

}  // namespace

bool decide_from_lease(RequestState *state) noexcept
{
    if (!leased(state)) {
        return false;
    }

    const Zone &zone = *state->refs[0]->zone;
    ngx_array_t *evicted = nullptr;
    // No entry (no room even after evictions): Redis decides, exactly.
    LeaseTake take{LeaseTake::Kind::kAskExact, 0, {0, 0}};
    std::uint64_t fleet_used = 0;
    Override override;

    {
        LeaseEntry entry(zone.leases, view(state->keys[0]), state->r->pool,
                         &evicted);

        if (entry.state() != nullptr) {
            LeaseLedger ledger(*entry.state(), kLeaseParams);
            std::uint64_t now_ms = lease_clock_ms();
            take = ledger.take(state->costs[0], now_ms, state->limits[0],
                               fleet_servers(state->r));
            fleet_used = entry.state()->fleet_used;
            override = ledger.override_at(now_ms);
        }
    }

    // The subjects evicted give back what they held, even when no entry
    // could be made after all.
    auto *backs = evicted != nullptr
                  ? static_cast<LeaseGiveBack *>(evicted->elts) : nullptr;

    for (ngx_uint_t i = 0; backs != nullptr && i < evicted->nelts; i++) {
        give_back(zone, view(backs[i].key), backs[i].units);
    }

    give_back(zone, view(state->keys[0]), take.give_back);

    if (take.ask > 0 && worker_objects().calls != nullptr) {
        char made[kZoneArgsMaxSize];
        worker_objects().calls->renew_lease(
            view(state->keys[0]),
            request_zone_args(state, 0, state->asked_ms, made),
            state->asked_ms, take.ask, zone, on_lease_renewed);
    }

    switch (take.kind) {
    case LeaseTake::Kind::kTaken:
    case LeaseTake::Kind::kRenewAndTaken:
        admit_from_lease(state, fleet_used, override);
        return true;
    default:
        return false;
    }
}

void note_fleet_count(const RequestState *state) noexcept
{
    if (!leased(state) || state->parts == 0 || state->part_failed) {
        return;
    }

    // When the call left, by the leases' clock (nginx's cached clock timed
    // it), where an override's end is to be dated from it.
    const Override &override = state->counts[0].override;
    std::uint64_t sent_ms = override.set
                            ? lease_clock_ms()
                                  - (ngx_current_msec - state->sent_msec)
                            : 0;
    LeaseEntry entry(state->refs[0]->zone->leases, view(state->keys[0]));

    if (entry.state() != nullptr) {
        LeaseLedger ledger(*entry.state(), kLeaseParams);
        ledger.counted(state->counts[0].total, override, sent_ms);
    }
}

void forget_lease_override(void *data, std::string_view key) noexcept
{
    auto *mcf = static_cast<MainConf *>(data);
    auto **zones = static_cast<Zone **>(mcf->zones.elts);

    for (ngx_uint_t z = 0; z < mcf->zones.nelts; z++) {
        if (zones[z]->leases == nullptr) {
            continue;
        }

        LeaseEntry entry(zones[z]->leases, key);

        if (entry.state() != nullptr) {
            LeaseLedger(*entry.state(), kLeaseParams).forget_override();
        }
    }
}

namespace {

// Gives back what the leases of every leased zone hold past their end or
// quiet, at most a few hundred a sweep, then waits for the next.
void on_sweep(ngx_event_t *ev) noexcept
{
    auto *mcf = static_cast<MainConf *>(ev->data);
    auto **zones = static_cast<Zone **>(mcf->zones.elts);
    constexpr ngx_uint_t kMaxGiveBacks = 256;
    LeaseGiveBack backs[kMaxGiveBacks];
    ngx_pool_t *pool = ngx_create_pool(4096, ev->log);

    for (ngx_uint_t z = 0; pool != nullptr && z < mcf->zones.nelts; z++) {
        const Zone &zone = *zones[z];

        if (zone.leases == nullptr) {
            continue;
        }

        ngx_uint_t n = sweep_lease_table(zone.leases, kLeaseParams,
                                         lease_clock_ms(), pool, backs,
                                         kMaxGiveBacks);

        for (ngx_uint_t i = 0; i < n; i++) {
            give_back(zone, view(backs[i].key), backs[i].units);
        }
    }

    if (pool != nullptr) {
        ngx_destroy_pool(pool);
    }

    ngx_add_timer(ev, kLeaseSweepMs);
}

}  // namespace

ngx_int_t start_lease_sweep(ngx_cycle_t *cycle, MainConf *mcf) noexcept
{
    auto **zones = static_cast<Zone **>(mcf->zones.elts);
    bool any = false;

    for (ngx_uint_t z = 0; z < mcf->zones.nelts; z++) {
        any = any || zones[z]->leases != nullptr;
    }

    if (!any || worker_objects().calls == nullptr) {
        return NGX_OK;
    }

    init_event(&sweep_event, on_sweep, mcf, cycle->log);
    ngx_add_timer(&sweep_event, kLeaseSweepMs);
    return NGX_OK;
}

void stop_lease_sweep() noexcept
{
    stop_timer(&sweep_event);
}

}  // namespace ratelimit
