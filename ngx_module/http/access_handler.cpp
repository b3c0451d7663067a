#include "http/access_handler.hpp"

#include "http/grpc_answer.hpp"
#include "http/request_metrics.hpp"
#include "http/request_top.hpp"
#include "local/local_decision.hpp"
#include "local/local_memory.hpp"
#include "metrics/metrics.hpp"
#include "leases/lease_decision.hpp"
#include "limits/algorithms.hpp"
#include "rate/reservations.hpp"
#include "rate/script_call.hpp"
#include "rate/zone_values.hpp"
#include "concurrency/permit_hold.hpp"
#include "concurrency/permit_report.hpp"
#include "status/status_handler.hpp"
#include "keys/subject_key.hpp"
#include "limits/sliding_window.hpp"

namespace ratelimit {

namespace {

// The ban the rejection is logged with (issue 43), in seconds: the one
// this request set ("banned for S s": once, at the ban, not for the
// requests it refuses), or in dry run the one the zone's limit would have
// set; 0 for none.
std::uint64_t ban_logged_s(const RequestState *state, bool dry_run,
                           const char **what)
{
    const Verdict &v = state->verdict;
    const ZoneCount &count = state->counts[v.zone];
    std::uint64_t ban_ms = state->refs[v.zone]->zone->ban_ms;

    if (!dry_run) {
        *what = ", banned for";
        return count.ban_set_ms / 1000;
    }

    *what = ", would ban for";
    return count.over && count.ban_left_ms == 0 ? ban_ms / 1000 : 0;
}

void log_limited(RequestState *state, bool dry_run)
{
    const Verdict &v = state->verdict;
    const ngx_str_t &zone = state->refs[v.zone]->zone->name;
    char subject[printable_subject_max_size()];
    size_t len = write_printable_subject(view(state->subjects[v.zone]),
                                         subject);
    const char *what = "";
    std::uint64_t ban_s = ban_logged_s(state, dry_run, &what);
    u_char ban[32 + NGX_INT64_LEN];
    u_char *end = ban_s > 0 ? ngx_snprintf(ban, sizeof(ban), "%s %uL s",
                                           what, ban_s)
                            : ban;

    ngx_log_error(state->lcf->log_level, state->r->connection->log, 0,
                  "limiting requests%s by zone \"%V\", key \"%*s\"%*s",
                  dry_run ? ", dry run," : "", &zone, len, subject,
                  static_cast<size_t>(end - ban), ban);
}

void log_permit_limited(RequestState *state, bool dry_run)
{
    const ZoneRef *ref = state->hold->ref;
    char subject[printable_subject_max_size()];
    size_t len = write_printable_subject(view(state->hold->subject),
                                         subject);
    const char *why = state->hold->outcome == PermitOutcome::kTimedOut
                      ? "waited too long" : "queue full";

    ngx_log_error(state->lcf->log_level, state->r->connection->log, 0,
                  "limiting requests%s by zone \"%V\", key \"%*s\", %s",
                  dry_run ? ", dry run," : "", &ref->zone->name, len, subject,
                  dry_run ? "would wait" : why);
}

// Whether the concurrency zone leaves the request to the rate zones; if
// not, its result.  A request refused by it is counted in no rate zone.
bool past_permit(RequestState *state)
{
    switch (state->hold->outcome) {
    case PermitOutcome::kQueueFull:
    case PermitOutcome::kTimedOut:
        state->result = Result::kRejected;
        break;
    case PermitOutcome::kError:
        if (state->lcf->fail != kFailClosed) {
            return true;
        }
        state->result = Result::kError;
        break;
    default:
        return true;
    }

    state->stage = RequestState::Stage::kDecided;
    return false;
}

// A request the rate zones passed takes the concurrency zone's word for
// its status: it waited in vain in dry run, or Redis did not answer.
void merge_permit_result(RequestState *state)
{
    PermitOutcome outcome = state->hold->outcome;

    if (state->result != Result::kPassed && state->result != Result::kNone) {
        return;
    }

    if (outcome == PermitOutcome::kDryRun) {
        log_permit_limited(state, true);
        state->result = Result::kRejectedDryRun;
    } else if (outcome == PermitOutcome::kError) {
        state->result = Result::kError;
    } else {
        state->result = Result::kPassed;
    }
}

// The end of a GCRA zone's wait: the phases go on, unless the timer fired
// only to let a write that nginx held back go out.
void end_of_turn_wait(ngx_http_request_t *r) noexcept
{
    ngx_event_t *wev = r->connection->write;

    if (wev->delayed) {
        if (ngx_handle_write_event(wev, 0) != NGX_OK) {
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        }
        return;
    }

    if (ngx_handle_read_event(r->connection->read, 0) != NGX_OK) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    if (RequestState *state = find_state(r)) {
        state->turn_came = true;
    }

    r->read_event_handler = ngx_http_block_reading;
    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
}

// A request a GCRA zone admitted waits for its turn as limit_req's does: on
// its connection's write timer, the connection watched (a client that
// leaves ends it), then the phases go on where they were.
ngx_int_t wait_for_turn(RequestState *state)
{
    ngx_http_request_t *r = state->r;

    state->delayed = true;
    state->delay_start = ngx_current_msec;
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = end_of_turn_wait;
    r->connection->write->delayed = 1;
    ngx_add_timer(r->connection->write, state->delay_ms);
    return NGX_AGAIN;
}

ngx_int_t ask_late_permit(RequestState *state);

// A request the rate zones let through goes on to the next phase, or to
// its concurrency zone first if that is asked after them.
ngx_int_t pass_on(RequestState *state)
{
    return state->late_permit != nullptr ? ask_late_permit(state)
                                         : NGX_DECLINED;
}

// The request's zone `i` has a limit of 0 and no verdict from Redis: it
// rejects the request (in a dry-run zone, would have), counting nothing.
// Its numbers: no request left, until the window ends (a calendar zone's
// window: its period now).
void reject_blocked(RequestState *state, ngx_uint_t i)
{
    std::uint64_t window_ms = sent_policy_of(state, i).window_ms;
    std::uint64_t now_ms = wall_clock_ms();

    state->now_ms = now_ms;
    state->verdict = {enforced(state, i) ? Outcome::kRejected
                                         : Outcome::kRejectedDryRun,
                      i, {0, 0, window_ms}};
    state->reset_epoch_s = seconds_ceil(now_ms + window_ms);
    state->result = enforced(state, i) ? Result::kRejected
                                       : Result::kRejectedDryRun;
}

// A request that has no verdict and whose limit in an enforced zone is 0
// (one an override could have lifted, had Redis answered) is rejected, as
// one of a zone without overrides is without asking: the fail policy is
// for Redis's failures, not a way past a limit of 0.
void reject_if_blocked(RequestState *state)
{
    for (ngx_uint_t i = 0; i < state->zones; i++) {
        if (state->limits[i] == 0 && enforced(state, i)) {
            reject_blocked(state, i);
            return;
        }
    }
}

// The phase's answer once the result is known; later passes through the
// phase (internal redirects) are let through: a request is counted once.
ngx_int_t act_on(RequestState *state)
{
    // No verdict from Redis: under `fail local`, this server's (which
    // knows the overrides Redis told it of).
    bool failed = state->result == Result::kError;
    decide_locally(state);

    if (state->result == Result::kError) {
        reject_if_blocked(state);
    }

    // Refused for want of a verdict, the parts of its call that counted it
    // (answered before another part failed or timed out) undo it.
    if (failed && (state->result == Result::kRejected
                   || (state->result == Result::kError
                       && state->lcf->fail == kFailClosed)))
    {
        take_back_reservations(state);
    }

    state->stage = RequestState::Stage::kDone;
    record_request_decision(state);
    record_request_top(state);
    note_fleet_count(state);

    if (state->hold != nullptr) {
        merge_permit_result(state);
    }

    if (state->peek) {
        ngx_http_finalize_request(state->r, send_status(state));
        return NGX_DONE;
    }

    switch (state->result) {
    case Result::kRejected:
        state->late_permit = nullptr;

        if (state->zones == 0) {
            log_permit_limited(state, false);
        } else {
            log_limited(state, false);
        }
        return refuse(state, state->lcf->status);

    case Result::kRejectedDryRun:
        log_limited(state, true);
        return pass_on(state);

    case Result::kError:
        if (state->lcf->fail == kFailClosed) {
            state->late_permit = nullptr;
            return refuse(state, state->lcf->fail_status);
        }

        return pass_on(state);

    case Result::kInvalid:
        state->late_permit = nullptr;
        return NGX_HTTP_BAD_REQUEST;

    case Result::kPassed:
        return state->delay_ms > 0 ? wait_for_turn(state) : pass_on(state);

    default:
        return pass_on(state);
    }
}

// The concurrency zone's answer to a request its rate zones let through:
// refused (or failed closed), the request gives back what they counted,
// and is answered as if the zone had been asked first.
ngx_int_t act_on_late_permit(RequestState *state)
{
    if (past_permit(state)) {
        state->stage = RequestState::Stage::kDone;
        merge_permit_result(state);
        return NGX_DECLINED;
    }

    if (state->reserved) {
        take_back_reservations(state);
        state->reserved = false;
    }

    record_request_left(state);
    state->zones = 0;
    return act_on(state);
}

void resume_phases(RequestState *state) noexcept
{
    state->r->write_event_handler(state->r);
}

void permit_decided(RequestState *state) noexcept
{
    state->stage = RequestState::Stage::kPermitDecided;
    resume_phases(state);
}

void late_permit_decided(RequestState *state) noexcept
{
    state->stage = RequestState::Stage::kLatePermitDecided;
    resume_phases(state);
}

// Once the concurrency zone, if any, let the request through: its rate
// zones.  A request that waited for a permit is counted in them only now,
// once.
ngx_int_t ask_rate_zones(RequestState *state)
{
    ngx_http_request_t *r = state->r;

    if (state->hold != nullptr && !past_permit(state)) {
        state->zones = 0;
        return act_on(state);
    }

    // A peek whose concurrency zone could not be reported on: 503.
    if (state->result == Result::kError) {
        return act_on(state);
    }

    if (state->zones == 0) {
        state->result = state->peek ? Result::kPeeked : Result::kNone;
        return act_on(state);
    }

    // Maybe later than the state was made: after a wait for a permit.
    state->asked_ms = wall_clock_ms();

    if (decide_from_lease(state) || !send_call(state)) {
        return act_on(state);
    }

    // A peek discards the body, and its read handler must go on doing so.
    if (!state->peek) {
        r->read_event_handler = ngx_http_test_reading;
    }

    r->write_event_handler = ngx_http_core_run_phases;
    return NGX_AGAIN;
}

// Asks the concurrency zone for a permit: `decided` resumes the request once
// the answer is known, and `then` acts on an answer known at once.
ngx_int_t ask_permit(RequestState *state, const ZoneRef *ref,
                     const ngx_str_t &subject,
                     void (*decided)(RequestState *state) noexcept,
                     ngx_int_t (*then)(RequestState *state))
{
    ngx_http_request_t *r = state->r;

    if (!start_permit(state, ref, subject, decided)) {
        return state->hold == nullptr ? NGX_HTTP_INTERNAL_SERVER_ERROR
                                      : then(state);
    }

    state->stage = RequestState::Stage::kWaiting;
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_core_run_phases;
    return NGX_AGAIN;
}

// Once the rate zones let the request through and its GCRA wait, if any,
// is over: its concurrency zone.
ngx_int_t ask_late_permit(RequestState *state)
{
    const ZoneRef *ref = state->late_permit;

    state->late_permit = nullptr;
    return ask_permit(state, ref, state->late_permit_subject,
                      late_permit_decided, act_on_late_permit);
}

// A concurrency zone is asked first (a request it refuses, or that waits
// for a permit, is counted in no rate zone until it has one), unless a GCRA
// zone of the request may make it wait for its turn: a request waiting for
// its turn holds no permit, so the permit is asked for after the wait.
bool permit_comes_last(const RequestState *state)
{
    for (ngx_uint_t i = 0; i < state->zones; i++) {
        const ZoneRef *ref = state->refs[i];

        if (row_of(ref->zone->policy).takes_turns
            && ref->delay < ref->burst)
        {
            return true;
        }
    }

    return false;
}

// A peek reports on the concurrency zone first, then on the rate zones.
ngx_int_t peek_permit(RequestState *state, const ZoneRef *ref,
                      const ngx_str_t &subject, ngx_uint_t position)
{
    if (!add_permit_report(state, ref, subject, position)) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (!send_permit_report(state, permit_decided)) {
        return ask_rate_zones(state);
    }

    state->stage = RequestState::Stage::kWaiting;
    state->r->write_event_handler = ngx_http_core_run_phases;
    return NGX_AGAIN;
}

// `ratelimit_peek_header`: present with a value other than empty, "0" or
// "false" (any case).
bool wants_peek(ngx_http_request_t *r, const ngx_str_t &name)
{
    const ngx_table_elt_t *h = find_header(r, name);

    if (h == nullptr) {
        return false;
    }

    const ngx_str_t &v = h->value;
    bool off = v.len == 0 || (v.len == 1 && v.data[0] == '0')
               || (v.len == 5
                   && ngx_strncasecmp(v.data, (u_char *) "false", 5) == 0);
    return !off;
}

ngx_int_t check_request_zones(ngx_http_request_t *r, const LocConf *lcf)
{
    RequestState *state = create_state(r, lcf->zones->nelts, true);

    if (state == nullptr) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    state->lcf = lcf;
    state->resume = resume_phases;
    state->check_start_us = metrics::check_clock();
    state->peek = lcf->peek_header.len > 0
                  && wants_peek(r, lcf->peek_header);

    auto *refs = static_cast<const ZoneRef *>(lcf->zones->elts);
    const ZoneRef *permit_ref = nullptr;
    ngx_str_t permit_subject = ngx_null_string;
    ngx_uint_t permit_position = 0;  // of its object in a peek's answer
    bool invalid_value = false;
    ngx_uint_t blocked = NGX_CONF_UNSET_UINT;  // the first zone of limit 0
    const char *outcome = state->peek ? "left out of the answer"
                          : "request refused with 400";

    for (ngx_uint_t i = 0; i < lcf->zones->nelts; i++) {
        ngx_str_t subject;

        if (ngx_http_complex_value(r, &refs[i].zone->key, &subject)
            != NGX_OK)
        {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        // As with limit_req: an empty key puts the request under no limit.
        if (subject.len == 0) {
            continue;
        }

        if (refs[i].zone->concurrency != nullptr) {
            permit_ref = &refs[i];
            permit_subject = subject;
            permit_position = state->zones;
            continue;
        }

        std::uint64_t limit = 0;
        std::uint64_t cost = 0;
        ValueFound found = find_limit(r, *refs[i].zone, outcome, &limit);

        // A limit of 0 where the subject's override may lift it: Redis
        // decides, as with any limit (act_on() keeps it rejected when no
        // verdict comes).  Not where the zone reads side keys for its bans
        // alone: a blocked plan is refused here, and bans nobody.
        if (found == ValueFound::kBlocked
            && refs[i].zone->side_base.len > 0 && main_conf(r)->overrides)
        {
            found = ValueFound::kFound;
        }

        // A peek counts nothing: its cost does not matter.
        if (found == ValueFound::kFound && !state->peek) {
            found = find_cost(r, refs[i], outcome, &cost);
        }

        switch (found) {
        case ValueFound::kFound:
            break;
        case ValueFound::kEmpty:
            continue;
        case ValueFound::kInvalid:
        case ValueFound::kBlocked:
            // A peek reports on the other zones; a request is refused,
            // below.
            if (state->peek) {
                continue;
            }
            if (found == ValueFound::kInvalid) {
                invalid_value = true;
            } else if (blocked == NGX_CONF_UNSET_UINT) {
                blocked = state->zones;
            }
            break;
        case ValueFound::kError:
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        state->refs[state->zones] = &refs[i];
        state->subjects[state->zones] = subject;
        state->limits[state->zones] = limit;
        state->costs[state->zones] = cost;
        state->zones++;
    }

    // A zone whose limit or cost has no valid value cannot decide the
    // request: it is refused as a bad request (a client that steers the
    // value must not get the fail policy meant for Redis), counted in none
    // of its zones, nor holds a permit of its concurrency zone.  A zone of
    // limit 0 rejects it.
    if (invalid_value || blocked != NGX_CONF_UNSET_UINT) {
        if (invalid_value) {
            state->result = Result::kInvalid;
        } else {
            reject_blocked(state, blocked);
        }

        state->stage = RequestState::Stage::kDecided;
        return act_on(state);
    }

    if (state->zones == 0 && permit_ref == nullptr && !state->peek) {
        state->result = Result::kNone;
        state->stage = RequestState::Stage::kDone;
        return NGX_DECLINED;
    }

    if (state->peek) {
        ngx_int_t rc = ngx_http_discard_request_body(r);

        if (rc != NGX_OK) {
            return rc;
        }
    }

    if (!build_keys(state)) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (permit_ref == nullptr) {
        return ask_rate_zones(state);
    }

    if (state->peek) {
        return peek_permit(state, permit_ref, permit_subject, permit_position);
    }

    if (permit_comes_last(state)) {
        state->late_permit = permit_ref;
        state->late_permit_subject = permit_subject;
        return ask_rate_zones(state);
    }

    return ask_permit(state, permit_ref, permit_subject, permit_decided,
                      ask_rate_zones);
}

}  // namespace

ngx_int_t preaccess_handler(ngx_http_request_t *r) noexcept
{
    // Subrequests belong to a main request that was decided already.
    if (r != r->main) {
        return NGX_DECLINED;
    }

    RequestState *state = find_state(r);

    if (state != nullptr) {
        switch (state->stage) {
        case RequestState::Stage::kNew:
            // The first pass ended in an error before anything was sent
            // and the request was redirected (error_page): let it be.
            return NGX_DECLINED;
        case RequestState::Stage::kWaiting:
            return NGX_AGAIN;
        case RequestState::Stage::kPermitDecided:
            // A peek's read handler goes on discarding its body.
            if (!state->peek) {
                r->read_event_handler = ngx_http_block_reading;
            }
            return ask_rate_zones(state);
        case RequestState::Stage::kDecided:
            r->read_event_handler = ngx_http_block_reading;
            return act_on(state);
        case RequestState::Stage::kLatePermitDecided:
            r->read_event_handler = ngx_http_block_reading;
            return act_on_late_permit(state);
        case RequestState::Stage::kDone:
            // Back from the wait for its GCRA turn, maybe for its permit.
            return pass_on(state);
        }
    }

    const LocConf *lcf = loc_conf(r);

    if (lcf->zones == NGX_CONF_UNSET_PTR || lcf->zones->nelts == 0) {
        return NGX_DECLINED;
    }

    return check_request_zones(r, lcf);
}

}  // namespace ratelimit
