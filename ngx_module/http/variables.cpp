#include "http/variables.hpp"

#include "limits/rate_headers.hpp"
#include "request/request_state.hpp"
#include "concurrency/permit_hold.hpp"

namespace ratelimit {

namespace {

enum NumberVariable : uintptr_t { kLimit, kRemaining, kReset };

void set_value(ngx_http_variable_value_t *v, u_char *data, size_t len)
{
    v->data = data;
    v->len = static_cast<unsigned>(len);
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
}

// The name of a result as $ratelimit_status shows it; empty for a request
// no zone applied to, and for a peek, which was not decided.  A request
// refused by a ban in force (issue 43) is BANNED.
ngx_str_t status_name(Result result, bool banned)
{
    switch (result) {
    case Result::kPassed:
        return ngx_string("PASSED");
    case Result::kRejected:
        if (banned) {
            return ngx_string("BANNED");
        }
        return ngx_string("REJECTED");
    case Result::kRejectedDryRun:
        return ngx_string("REJECTED_DRY_RUN");
    case Result::kError:
        return ngx_string("ERROR");
    case Result::kInvalid:
        return ngx_string("INVALID");
    case Result::kNone:
    case Result::kPeeked:
        break;
    }

    return ngx_null_string;
}

ngx_int_t status_variable(ngx_http_request_t *r,
                          ngx_http_variable_value_t *v,
                          uintptr_t data) noexcept
{
    const RequestState *state = find_state(r);
    ngx_str_t name = ngx_null_string;

    if (state != nullptr && state->stage != RequestState::Stage::kNew
        && state->stage != RequestState::Stage::kWaiting)
    {
        name = status_name(state->result, state->banned);
    }

    if (name.len == 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    set_value(v, name.data, name.len);
    return NGX_OK;
}

ngx_int_t number_variable(ngx_http_request_t *r,
                          ngx_http_variable_value_t *v,
                          uintptr_t data) noexcept
{
    const RequestState *state = find_state(r);

    if (state == nullptr || state->zones == 0
        || (state->result != Result::kPassed
            && state->result != Result::kRejected
            && state->result != Result::kRejectedDryRun))
    {
        v->not_found = 1;
        return NGX_OK;
    }

    std::uint64_t value = data == kLimit ? state->verdict.status.limit
                          : data == kRemaining
                          ? state->verdict.status.remaining
                          : state->reset_epoch_s;
    auto *text = static_cast<u_char *>(ngx_pnalloc(r->pool, kMaxDigits));

    if (text == nullptr) {
        return NGX_ERROR;
    }

    set_value(v, text, write_decimal(value, reinterpret_cast<char *>(text)));
    return NGX_OK;
}

// The zone that decided the request: the one that rejected it (or would
// have, in dry run), else the one whose numbers its headers tell; nullptr
// if none did (no zone applied, Redis gave no verdict, a peek).  A rate
// zone's verdict names it unless the request passed its rate zones and its
// concurrency zone refused it (or would have, in dry run), or only a
// concurrency zone applied.
const ngx_str_t *deciding_zone(const RequestState *state)
{
    if (state->stage != RequestState::Stage::kDone
        || (state->result != Result::kPassed
            && state->result != Result::kRejected
            && state->result != Result::kRejectedDryRun))
    {
        return nullptr;
    }

    bool rate_decided = state->zones > 0
                        && (state->result == Result::kPassed
                            || state->verdict.outcome != Outcome::kPassed);

    if (rate_decided) {
        return &state->refs[state->verdict.zone]->zone->name;
    }

    return state->hold != nullptr ? &state->hold->ref->zone->name : nullptr;
}

// $ratelimit_zone: the name of the zone that decided the request.
ngx_int_t zone_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
                        uintptr_t) noexcept
{
    const RequestState *state = find_state(r);
    const ngx_str_t *name = state != nullptr ? deciding_zone(state)
                                             : nullptr;

    if (name == nullptr) {
        v->not_found = 1;
        return NGX_OK;
    }

    set_value(v, name->data, name->len);
    return NGX_OK;
}

// The request's hold if it waited in a concurrency zone's queue.
const PermitHold *waited_hold(ngx_http_request_t *r)
{
    const RequestState *state = find_state(r);
    const PermitHold *hold = state != nullptr ? state->hold : nullptr;

    if (hold == nullptr
        || (hold->outcome != PermitOutcome::kAdmittedAfterWait
            && hold->outcome != PermitOutcome::kTimedOut))
    {
        return nullptr;
    }

    return hold;
}

// $ratelimit_queue_time: milliseconds the request waited in its
// concurrency zone's queue; empty if it did not wait.
ngx_int_t queue_time_variable(ngx_http_request_t *r,
                              ngx_http_variable_value_t *v,
                              uintptr_t) noexcept
{
    const PermitHold *hold = waited_hold(r);

    if (hold == nullptr) {
        v->not_found = 1;
        return NGX_OK;
    }

    auto *text = static_cast<u_char *>(ngx_pnalloc(r->pool, kMaxDigits));

    if (text == nullptr) {
        return NGX_ERROR;
    }

    set_value(v, text, write_decimal(hold->queue_ms,
                                     reinterpret_cast<char *>(text)));
    return NGX_OK;
}

// $ratelimit_handoff_time: milliseconds, to the microsecond, from the
// release that freed the permit a waiter got to the waiter's resumption;
// empty if it did not wait, or learned of its permit by a check (a lost
// Pub/Sub message) rather than by the message.
ngx_int_t handoff_time_variable(ngx_http_request_t *r,
                                ngx_http_variable_value_t *v,
                                uintptr_t) noexcept
{
    const PermitHold *hold = waited_hold(r);

    if (hold == nullptr || hold->outcome != PermitOutcome::kAdmittedAfterWait
        || hold->handoff_us == kUnknownHandoff)
    {
        v->not_found = 1;
        return NGX_OK;
    }

    auto *text = static_cast<u_char *>(ngx_pnalloc(r->pool,
                                                   NGX_INT64_LEN + 4));

    if (text == nullptr) {
        return NGX_ERROR;
    }

    u_char *end = ngx_sprintf(text, "%uL.%03uL", hold->handoff_us / 1000,
                              hold->handoff_us % 1000);
    set_value(v, text, static_cast<size_t>(end - text));
    return NGX_OK;
}

// $ratelimit_delay: milliseconds a request its GCRA zones admitted waited
// for its turn ("0" if none; of a client that left first, until then);
// empty for one they did not admit.
ngx_int_t delay_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
                         uintptr_t) noexcept
{
    const RequestState *state = find_state(r);

    if (state == nullptr || state->result != Result::kPassed
        || state->stage != RequestState::Stage::kDone)
    {
        v->not_found = 1;
        return NGX_OK;
    }

    auto *text = static_cast<u_char *>(ngx_pnalloc(r->pool, kMaxDigits));

    if (text == nullptr) {
        return NGX_ERROR;
    }

    ngx_msec_t waited = !state->delayed ? 0
                        : state->turn_came ? state->delay_ms
                        : ngx_min(state->delay_ms,
                                  ngx_current_msec - state->delay_start);

    set_value(v, text, write_decimal(waited, reinterpret_cast<char *>(text)));
    return NGX_OK;
}

ngx_http_variable_t variables[] = {
    {ngx_string("ratelimit_status"), nullptr, status_variable, 0,
     NGX_HTTP_VAR_NOCACHEABLE, 0},
    {ngx_string("ratelimit_limit"), nullptr, number_variable, kLimit,
     NGX_HTTP_VAR_NOCACHEABLE, 0},
    {ngx_string("ratelimit_remaining"), nullptr, number_variable, kRemaining,
     NGX_HTTP_VAR_NOCACHEABLE, 0},
    {ngx_string("ratelimit_reset"), nullptr, number_variable, kReset,
     NGX_HTTP_VAR_NOCACHEABLE, 0},
    {ngx_string("ratelimit_queue_time"), nullptr, queue_time_variable, 0,
     NGX_HTTP_VAR_NOCACHEABLE, 0},
    {ngx_string("ratelimit_handoff_time"), nullptr, handoff_time_variable, 0,
     NGX_HTTP_VAR_NOCACHEABLE, 0},
    {ngx_string("ratelimit_delay"), nullptr, delay_variable, 0,
     NGX_HTTP_VAR_NOCACHEABLE, 0},
    {ngx_string("ratelimit_zone"), nullptr, zone_variable, 0,
     NGX_HTTP_VAR_NOCACHEABLE, 0},
};

}  // namespace

ngx_int_t add_variables(ngx_conf_t *cf) noexcept
{
    for (ngx_http_variable_t &spec : variables) {
        ngx_http_variable_t *var = ngx_http_add_variable(cf, &spec.name,
                                                         spec.flags);

        if (var == nullptr) {
            return NGX_ERROR;
        }

        var->get_handler = spec.get_handler;
        var->data = spec.data;
    }

    return NGX_OK;
}

}  // namespace ratelimit
