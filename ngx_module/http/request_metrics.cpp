#include "http/request_metrics.hpp"

#include "limits/algorithms.hpp"
#include "metrics/metrics.hpp"

namespace ratelimit {

namespace {

// What zone i of the request decided, as the metrics count it; kCount if
// the zone is not counted for this result.
Decision zone_decision(const RequestState *state, ngx_uint_t i)
{
    bool deciding = i == state->verdict.zone;

    switch (state->result) {
    case Result::kRejected:
        return deciding ? Decision::kRejected : Decision::kCount;
    case Result::kRejectedDryRun:
        return deciding ? Decision::kRejectedDryRun : Decision::kPassed;
    case Result::kPassed:
        return Decision::kPassed;
    case Result::kError:
        return state->lcf->fail == kFailClosed ? Decision::kErrorRejected
                                               : Decision::kError;
    case Result::kInvalid:
        return Decision::kInvalid;
    default:
        return Decision::kCount;
    }
}

// The units of zone i: the cost it counted, or the cost it refused; and
// the wait for its turn it gave a request it admitted.
void record_zone_units(const RequestState *state, ngx_uint_t i,
                       Decision decision)
{
    ngx_uint_t zone = state->refs[i]->zone->index;
    Policy policy = policy_of(state, i);

    if (decision == Decision::kPassed && state->delay_ms > 0) {
        std::uint64_t wait_ms = row_of(policy).wait_ms(
            policy, state->counts[i].total, state->costs[i],
            state->refs[i]->delay);
        if (wait_ms > 0) {
            metrics::record_zone_delay(zone, wait_ms);
        }
    }

    if (decision == Decision::kRejected) {
        metrics::record_units(zone, UnitEvent::kRejected, state->costs[i]);
    } else if (decision == Decision::kPassed && state->reserved
               && !state->counts[i].over)
    {
        metrics::record_units(zone, UnitEvent::kAdmitted, state->costs[i]);
    }
}

// Main requests let through by a rate zone leave it here.
ngx_int_t request_log_handler(ngx_http_request_t *r) noexcept
{
    RequestState *state = metrics::enabled() ? find_state(r) : nullptr;

    if (state != nullptr) {
        record_request_left(state);
    }

    return NGX_OK;
}

}  // namespace

void record_request_left(RequestState *state) noexcept
{
    if (!state->in_flight) {
        return;
    }

    state->in_flight = false;

    bool success = response_succeeded(state->r);
    std::uint64_t now = metrics::now_us();

    for (ngx_uint_t i = 0; i < state->zones; i++) {
        metrics::record_zone_done(state->refs[i]->zone->index, success,
                                  state->check_start_us, now);
    }
}

void record_request_decision(RequestState *state) noexcept
{
    if (!metrics::enabled() || state->peek) {
        return;
    }

    std::uint64_t now = metrics::now_us();
    std::uint64_t wait_us = now - state->check_start_us;

    for (ngx_uint_t i = 0; i < state->zones; i++) {
        Decision decision = zone_decision(state, i);
        const Zone &zone = *state->refs[i]->zone;

        // The limit applied: the subject's override's where one did.  A
        // request refused as a bad one applied none.
        if (zone.limit_value != nullptr && state->result != Result::kInvalid) {
            metrics::record_zone_limit(zone.index, policy_of(state, i).limit,
                                       now);
        }

        if (decision != Decision::kCount
            && metrics::record_zone_decision(zone.index, decision, wait_us))
        {
            state->in_flight = true;
        }

        record_zone_units(state, i, decision);
    }
}

ngx_int_t install_request_log_handler(ngx_conf_t *cf) noexcept
{
    auto *mcf = static_cast<MainConf *>(
        ngx_http_conf_get_module_main_conf(cf, ngx_http_ratelimit_module));

    return mcf->metrics ? add_phase_handler(cf, NGX_HTTP_LOG_PHASE,
                                            request_log_handler)
                        : NGX_OK;
}

}  // namespace ratelimit
