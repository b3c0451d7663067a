#include "access_handler.hpp"

#include "metrics.hpp"
#include "script_call.hpp"
#include "status_handler.hpp"
#include "subject_key.hpp"

namespace ratelimit {

namespace {

void log_limited(RequestState *state, bool dry_run)
{
    const Verdict &v = state->verdict;
    const ngx_str_t &zone = state->refs[v.zone]->zone->name;
    char subject[printable_subject_max_size()];
    size_t len = write_printable_subject(view(state->subjects[v.zone]),
                                         subject);

    ngx_log_error(state->lcf->log_level, state->r->connection->log, 0,
                  "limiting requests%s by zone \"%V\", key \"%*s\"",
                  dry_run ? ", dry run," : "", &zone, len, subject);
}

// The phase's answer once the result is known; later passes through the
// phase (internal redirects) are let through: a request is counted once.
ngx_int_t act_on(RequestState *state)
{
    state->stage = RequestState::Stage::kDone;
    metrics::record_decision(state);

    if (state->peek) {
        ngx_http_finalize_request(state->r, send_status(state));
        return NGX_DONE;
    }

    switch (state->result) {
    case Result::kRejected:
        log_limited(state, false);
        return static_cast<ngx_int_t>(state->lcf->status);

    case Result::kRejectedDryRun:
        log_limited(state, true);
        return NGX_DECLINED;

    case Result::kError:
        return state->lcf->fail == kFailClosed
               ? NGX_HTTP_SERVICE_UNAVAILABLE : NGX_DECLINED;

    default:
        return NGX_DECLINED;
    }
}

void resume_phases(RequestState *state) noexcept
{
    state->r->write_event_handler(state->r);
}

// `ratelimit_peek_header`: present with a value other than empty, "0" or
// "false" (any case).
bool wants_peek(ngx_http_request_t *r, const ngx_str_t &name)
{
    ngx_list_part_t *part = &r->headers_in.headers.part;
    auto *h = static_cast<ngx_table_elt_t *>(part->elts);

    for (ngx_uint_t i = 0; /* void */; i++) {
        if (i >= part->nelts) {
            if (part->next == nullptr) {
                return false;
            }
            part = part->next;
            h = static_cast<ngx_table_elt_t *>(part->elts);
            i = 0;
        }

        if (h[i].key.len != name.len
            || ngx_strncasecmp(h[i].key.data, name.data, name.len) != 0)
        {
            continue;
        }

        const ngx_str_t &v = h[i].value;
        bool off = v.len == 0 || (v.len == 1 && v.data[0] == '0')
                   || (v.len == 5
                       && ngx_strncasecmp(v.data,
                                          (u_char *) "false", 5) == 0);
        return !off;
    }
}

ngx_int_t start(ngx_http_request_t *r, const LocConf *lcf)
{
    RequestState *state = create_state(r, true);

    if (state == nullptr) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    state->lcf = lcf;
    state->resume = resume_phases;
    metrics::record_check_start(state);
    state->peek = lcf->peek_header.len > 0
                  && wants_peek(r, lcf->peek_header);

    auto *refs = static_cast<const ZoneRef *>(lcf->zones->elts);

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

        state->refs[state->zones] = &refs[i];
        state->subjects[state->zones] = subject;
        state->zones++;
    }

    if (state->zones == 0 && !state->peek) {
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

    if (state->zones == 0) {
        state->result = Result::kPeeked;
        return act_on(state);
    }

    if (!build_keys(state)) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (!send_call(state)) {
        return act_on(state);
    }

    // A peek discards the body, and its read handler must go on doing so.
    if (!state->peek) {
        r->read_event_handler = ngx_http_test_reading;
    }

    r->write_event_handler = ngx_http_core_run_phases;
    return NGX_AGAIN;
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
        case RequestState::Stage::kDecided:
            r->read_event_handler = ngx_http_block_reading;
            return act_on(state);
        case RequestState::Stage::kDone:
            return NGX_DECLINED;
        }
    }

    const LocConf *lcf = loc_conf(r);

    if (lcf->zones == NGX_CONF_UNSET_PTR || lcf->zones->nelts == 0) {
        return NGX_DECLINED;
    }

    return start(r, lcf);
}

}  // namespace ratelimit
