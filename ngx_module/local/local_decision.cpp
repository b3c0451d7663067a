#include "local/local_decision.hpp"

#include "local/local_breaker.hpp"
#include "local/local_memory.hpp"
#include "limits/algorithms.hpp"
#include "limits/sliding_window.hpp"
#include "metrics/metrics.hpp"
#include "worker/worker_objects.hpp"

namespace ratelimit {

namespace {

// The zone to report: the first enforced zone that rejected, else the
// first dry-run zone that would have, else the one with the fewest
// remaining (the first on a tie).
ngx_uint_t reported_zone(const local::LocalAsk *asks, ngx_uint_t n,
                         bool passed)
{
    ngx_uint_t fewest = 0;

    for (ngx_uint_t i = 0; i < n; i++) {
        if (!asks[i].status.fits && (asks[i].enforced || passed)) {
            return i;
        }

        if (asks[i].status.remaining < asks[fewest].status.remaining) {
            fewest = i;
        }
    }

    return fewest;
}

// The end of zone i's local window at now_ms (wall clock): of the fixed
// windows as long as the zone's, or a calendar zone's period.
std::uint64_t local_window_end(const RequestState *state, ngx_uint_t i,
                               std::uint64_t now_ms)
{
    Policy policy = sent_policy_of(state, i);
    policy.bucket_ms = policy.window_ms;
    return row_of(policy).bucket_at(policy, now_ms).end_ms;
}

void record_local(const RequestState *state)
{
    for (ngx_uint_t i = 0; i < state->zones; i++) {
        bool rejected = state->result == Result::kRejected
                        && i == state->verdict.zone;

        if (state->result != Result::kRejected || rejected) {
            metrics::record_local_decision(
                state->refs[i]->zone->index,
                rejected ? LocalDecision::kRejected : LocalDecision::kPassed);
        }
    }
}

}  // namespace

bool deciding_locally(const RequestState *state) noexcept
{
    LocalBreaker *breaker = worker_objects().breaker;

    return state->lcf->fail == kFailLocal && !state->peek
           && breaker != nullptr && breaker->open();
}

void decide_locally(RequestState *state) noexcept
{
    ngx_shm_zone_t *zone = main_conf(state->r)->local_zone;
    LocalBreaker *breaker = worker_objects().breaker;

    if (state->result != Result::kError || state->lcf->fail != kFailLocal
        || state->peek || zone == nullptr || breaker == nullptr
        || state->zones == 0)
    {
        return;
    }

    ngx_uint_t servers = breaker->servers(state->lcf->fail_servers);
    local::LocalAsk asks[kMaxZonesPerRequest];
    std::uint64_t now_ms = wall_clock_ms();

    for (ngx_uint_t i = 0; i < state->zones; i++) {
        // A limit or cost with no valid value (its keys are not made
        // then): the request fails open.  A limit of 0 is a share of 0.
        if (state->keys[i].len == 0) {
            return;
        }

        asks[i] = {view(state->keys[i]), state->limits[i], servers,
                   local_window_end(state, i, now_ms), state->costs[i],
                   enforced(state, i), 0, {}};
    }

    bool passed = local::count_locally(zone, asks, state->zones, now_ms);
    ngx_uint_t z = reported_zone(asks, state->zones, passed);
    const LocalStatus &status = asks[z].status;

    Outcome outcome = !passed ? Outcome::kRejected
                      : status.fits ? Outcome::kPassed
                      : Outcome::kRejectedDryRun;

    state->result = outcome == Outcome::kRejected ? Result::kRejected
                    : outcome == Outcome::kPassed ? Result::kPassed
                    : Result::kRejectedDryRun;
    state->now_ms = now_ms;
    state->verdict = {outcome, z,
                      {asks[z].share, status.remaining, status.reset_ms}};
    state->reset_epoch_s = seconds_ceil(now_ms + status.reset_ms);
    record_local(state);
}

}  // namespace ratelimit
