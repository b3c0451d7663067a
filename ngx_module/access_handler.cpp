#include "access_handler.hpp"

#include "rate_headers.hpp"
#include "redis_link.hpp"
#include "request_state.hpp"
#include "sliding_window.hpp"
#include "subject_key.hpp"

namespace ratelimit {

namespace {

const char kEvalSha[] = "EVALSHA";
const char kEval[] = "EVAL";
const char kEnforce[] = "1";
const char kDryRun[] = "0";

// Fixed leading arguments of the script call: command, script, key count.
constexpr int kLeadArgs = 3;

void fail(RequestState *state, const char *why, std::string_view detail = {})
{
    RedisLink *link = main_conf(state->r)->link;

    state->result = Result::kError;
    state->stage = RequestState::Stage::kDecided;

    if (link == nullptr || link->may_log()) {
        ngx_log_error(NGX_LOG_WARN, state->r->connection->log, 0,
                      "ratelimit: %s%*s, request %s", why, detail.size(),
                      detail.data(),
                      state->lcf->fail == kFailClosed ? "rejected"
                                                      : "passed");
    }
}

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

void take_verdict(RequestState *state, const ScriptReply &reply,
                  const ZoneCount *counts)
{
    const Policy *policies[kMaxZonesPerRequest];
    bool enforced[kMaxZonesPerRequest];

    for (ngx_uint_t i = 0; i < state->zones; i++) {
        policies[i] = &state->refs[i]->zone->policy;
        enforced[i] = !(state->refs[i]->dry_run || state->lcf->dry_run);
    }

    state->verdict = decide(policies, enforced, counts, state->zones,
                            reply.now_ms, reply.rejected);
    state->reset_epoch_s = seconds_ceil(reply.now_ms
                                        + state->verdict.status.reset_ms);

    switch (state->verdict.outcome) {
    case Outcome::kRejected:
        state->result = Result::kRejected;
        break;
    case Outcome::kRejectedDryRun:
        state->result = Result::kRejectedDryRun;
        break;
    case Outcome::kPassed:
        state->result = Result::kPassed;
        break;
    }

    state->stage = RequestState::Stage::kDecided;
}

// Resumes a request that waited, from a posted event or the timeout, never
// from inside hiredis: the request may go on to anything, hiredis's
// context must not be under it.
void on_wake(ngx_event_t *ev) noexcept
{
    auto *state = static_cast<RequestState *>(ev->data);
    ngx_http_request_t *r = state->r;
    ngx_connection_t *c = r->connection;

    if (ev->timedout) {
        ev->timedout = 0;

        if (state->pending != nullptr) {
            state->pending->state = nullptr;
            state->pending = nullptr;
        }

        u_char ms[NGX_INT_T_LEN + 16];
        u_char *end = ngx_sprintf(ms, " after %M ms",
                                  main_conf(r)->redis->timeout);
        fail(state, "redis timed out",
             {reinterpret_cast<char *>(ms), static_cast<size_t>(end - ms)});
    }

    ngx_http_set_log_request(c->log, r);
    r->write_event_handler(r);
    ngx_http_run_posted_requests(c);
}

bool build_call(ngx_http_request_t *r, RequestState *state,
                const MainConf *mcf)
{
    ngx_uint_t zones = state->zones;
    int argc = kLeadArgs + static_cast<int>(zones * (1 + kArgsPerZone));
    auto *argv = static_cast<const char **>(
        ngx_palloc(r->pool, argc * sizeof(const char *)));
    auto *len = static_cast<size_t *>(
        ngx_palloc(r->pool, argc * sizeof(size_t)));
    auto *numkeys = static_cast<char *>(ngx_pnalloc(r->pool, kMaxDigits));

    if (argv == nullptr || len == nullptr || numkeys == nullptr) {
        return false;
    }

    std::string_view sha = window_script_sha1();
    argv[0] = kEvalSha;
    len[0] = sizeof(kEvalSha) - 1;
    argv[1] = sha.data();
    len[1] = sha.size();
    argv[2] = numkeys;
    len[2] = write_decimal(zones, numkeys);

    const char **key_argv = argv + kLeadArgs;
    size_t *key_len = len + kLeadArgs;
    const char **zone_argv = key_argv + zones;
    size_t *zone_len = key_len + zones;

    for (ngx_uint_t i = 0; i < zones; i++) {
        const ZoneRef *ref = state->refs[i];
        std::string_view prefix = view(mcf->prefix);
        std::string_view name = view(ref->zone->name);
        std::string_view subject = view(state->subjects[i]);
        auto *key = static_cast<char *>(ngx_pnalloc(
            r->pool, subject_key_size(prefix, name, subject)));

        if (key == nullptr) {
            return false;
        }

        key_argv[i] = key;
        key_len[i] = write_subject_key(prefix, name, subject, key);

        const char **a = zone_argv + i * kArgsPerZone;
        size_t *l = zone_len + i * kArgsPerZone;

        for (int k = 0; k < kZoneArgs; k++) {
            a[k] = reinterpret_cast<const char *>(ref->zone->args[k].data);
            l[k] = ref->zone->args[k].len;
        }

        bool dry_run = ref->dry_run || state->lcf->dry_run;
        a[kZoneArgs] = dry_run ? kDryRun : kEnforce;
        l[kZoneArgs] = 1;
    }

    state->argc = argc;
    state->argv = argv;
    state->argvlen = len;
    return true;
}

ngx_int_t start(ngx_http_request_t *r, const LocConf *lcf)
{
    MainConf *mcf = main_conf(r);
    RequestState *state = create_state(r);

    if (state == nullptr) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    state->lcf = lcf;

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

    if (state->zones == 0) {
        state->result = Result::kNone;
        state->stage = RequestState::Stage::kDone;
        return NGX_DECLINED;
    }

    if (!build_call(r, state, mcf)) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (mcf->link == nullptr
        || !mcf->link->send(state, state->argc, state->argv, state->argvlen))
    {
        fail(state, "redis is not connected");
        return act_on(state);
    }

    state->stage = RequestState::Stage::kWaiting;
    state->wake.handler = on_wake;
    state->wake.data = state;
    state->wake.log = r->connection->log;
    ngx_add_timer(&state->wake, mcf->redis->timeout);

    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_core_run_phases;
    return NGX_AGAIN;
}

}  // namespace

void on_script_reply(RequestState *state, const redisReply *reply) noexcept
{
    if (state->stage != RequestState::Stage::kWaiting) {
        return;
    }

    ZoneCount counts[kMaxZonesPerRequest];
    ScriptReply decoded = decode_script_reply(reply, state->zones, counts);

    switch (decoded.kind) {
    case ScriptReply::Kind::kVerdict:
        take_verdict(state, decoded, counts);
        break;

    case ScriptReply::Kind::kNoScript:
        // A Redis restarted or flushed behind our back: send the script
        // itself once, which also caches it for the calls that follow.
        if (!state->retried) {
            std::string_view script = window_script();
            state->retried = true;
            state->argv[0] = kEval;
            state->argvlen[0] = sizeof(kEval) - 1;
            state->argv[1] = script.data();
            state->argvlen[1] = script.size();

            RedisLink *link = main_conf(state->r)->link;

            if (link->send(state, state->argc, state->argv,
                           state->argvlen))
            {
                return;
            }
        }
        fail(state, "redis does not have the script: ", decoded.error);
        break;

    case ScriptReply::Kind::kError:
        fail(state, "redis answered an error: ", decoded.error);
        break;

    case ScriptReply::Kind::kMalformed:
        fail(state, reply == nullptr ? "redis connection failed"
                                     : "unexpected reply from redis");
        break;
    }

    if (state->wake.timer_set) {
        ngx_del_timer(&state->wake);
    }

    ngx_post_event(&state->wake, &ngx_posted_events);
}

ngx_int_t preaccess_handler(ngx_http_request_t *r) noexcept
{
    // Subrequests belong to a main request that was decided already.
    if (r != r->main) {
        return NGX_DECLINED;
    }

    RequestState *state = find_state(r);

    if (state != nullptr) {
        switch (state->stage) {
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
