#include "rate/reservations.hpp"

#include "limits/algorithms.hpp"
#include "rate/call_batch.hpp"
#include "rate/zone_values.hpp"
#include "worker/worker_objects.hpp"

namespace ratelimit {

namespace {

// The part of the call that decided the request's zone i.
const RequestState::Part *part_of(const RequestState *state, ngx_uint_t i)
{
    for (ngx_uint_t p = 0; p < state->parts; p++) {
        const RequestState::Part &part = state->part[p];

        for (ngx_uint_t j = 0; j < part.zones; j++) {
            if (part.zone[j] == i) {
                return &part;
            }
        }
    }

    return nullptr;
}

// Adds `units` to the bucket zone i counted the request in: the bucket (of
// a fixed window, the window; of a calendar zone, its period) of the Redis
// time its part was decided at.  The settle's call is written with the
// request's policy, a calendar zone's in the periods of nginx's clock when
// it is sent (CallBatcher::settle()): Redis applies nothing once the
// request's period has ended on its clock.
void send_settle(const RequestState *state, ngx_uint_t i, std::int64_t units)
{
    CallBatcher *calls = worker_objects().calls;
    const RequestState::Part *part = part_of(state, i);

    if (calls == nullptr || part == nullptr || units == 0) {
        return;
    }

    Policy sent = sent_policy_of(state, i);

    calls->settle(view(state->keys[i]), sent, units,
                  row_of(sent).bucket_at(sent, part->now_ms).number,
                  *state->refs[i]->zone);
}

// The zone of the request that `settle` names, if it counted the request.
bool counted_in(const RequestState *state, const Zone *zone, ngx_uint_t *i)
{
    for (ngx_uint_t k = 0; k < state->zones; k++) {
        if (state->refs[k]->zone == zone) {
            *i = k;
            return !state->counts[k].over;
        }
    }

    return false;
}

// Whether the client closed the connection before the response was out
// (499, or a failed send): the upstream's value is then missing because
// nginx stopped reading it, not because the upstream gave none, and an
// empty value refunds nothing, or a client could take every answer for
// free by leaving before its header or trailer.
bool client_left(const ngx_http_request_t *r)
{
    return r->connection->error
           || r->headers_out.status == NGX_HTTP_CLIENT_CLOSED_REQUEST;
}

}  // namespace

void take_back_reservations(RequestState *state) noexcept
{
    for (ngx_uint_t p = 0; p < state->parts; p++) {
        RequestState::Part &part = state->part[p];

        // A part that failed may or may not have counted it: unknown,
        // so never undone.
        for (ngx_uint_t j = 0; part.answered && !part.rejected
                               && j < part.zones; j++)
        {
            ngx_uint_t i = part.zone[j];

            // A zone the request did not fit (dry run) did not count it.
            if (!state->counts[i].over) {
                send_settle(state, i,
                            -static_cast<std::int64_t>(state->costs[i]));
            }
        }

        // Undone: a later refusal of the request undoes nothing again.
        part.answered = false;
    }
}

void settle_reservations(RequestState *state) noexcept
{
    const LocConf *lcf = state->lcf;

    if (!state->reserved || state->settled || lcf == nullptr
        || lcf->settles == NGX_CONF_UNSET_PTR)
    {
        return;
    }

    state->settled = true;

    auto *settles = static_cast<const SettleRef *>(lcf->settles->elts);

    for (ngx_uint_t s = 0; s < lcf->settles->nelts; s++) {
        ngx_uint_t i;

        if (!counted_in(state, settles[s].zone, &i)) {
            continue;
        }

        auto reserved = static_cast<std::int64_t>(state->costs[i]);
        std::uint64_t used = 0;

        switch (find_settled_units(state->r, settles[s], &used)) {
        case ValueFound::kFound:
            send_settle(state, i, static_cast<std::int64_t>(used) - reserved);
            break;
        case ValueFound::kEmpty:
            if (settles[s].refund_empty && !client_left(state->r)) {
                send_settle(state, i, -reserved);
            }
            break;
        case ValueFound::kInvalid:
        case ValueFound::kBlocked:
        case ValueFound::kError:
            break;
        }
    }
}

}  // namespace ratelimit
