#include "script_call.hpp"

#include "deny_cache.hpp"
#include "rate_headers.hpp"
#include "redis_link.hpp"
#include "sliding_window.hpp"
#include "subject_key.hpp"

namespace ratelimit {

namespace {

const char kEvalSha[] = "EVALSHA";
const char kEval[] = "EVAL";
const char kCount[] = "count";
const char kPeek[] = "peek";
const char kEnforce[] = "1";
const char kDryRun[] = "0";

// Arguments before the keys: command, script, key count.
constexpr int kLeadArgs = 3;

void fail(RequestState *state, const char *why, std::string_view detail = {})
{
    RedisLink *link = main_conf(state->r)->link;

    state->result = Result::kError;
    state->stage = RequestState::Stage::kDecided;

    if (link != nullptr && !link->may_log()) {
        return;
    }

    const char *outcome = state->peek ? "answered 503"
                          : state->lcf->fail == kFailClosed
                          ? "request rejected" : "request passed";

    ngx_log_error(NGX_LOG_WARN, state->r->connection->log, 0,
                  "ratelimit: %s%*s, %s", why, detail.size(), detail.data(),
                  outcome);
}

std::string_view zone_key(const RequestState *state, ngx_uint_t zone)
{
    return {state->argv[kLeadArgs + zone], state->argvlen[kLeadArgs + zone]};
}

bool enforced(const RequestState *state, ngx_uint_t zone)
{
    return !(state->refs[zone]->dry_run
             || (state->lcf != nullptr && state->lcf->dry_run));
}

// A rejection this worker remembers, answered without asking Redis.
bool reject_from_memory(RequestState *state, const DenyCache &denied)
{
    for (ngx_uint_t i = 0; i < state->zones; i++) {
        std::uint64_t ms = enforced(state, i)
                           ? denied.denied_for(zone_key(state, i),
                                               ngx_current_msec)
                           : 0;

        if (ms == 0) {
            continue;
        }

        ngx_time_t *tp = ngx_timeofday();
        std::uint64_t now_ms = static_cast<std::uint64_t>(tp->sec) * 1000
                               + tp->msec;

        state->verdict = {Outcome::kRejected, i,
                          {state->refs[i]->zone->policy.limit, 0, ms}};
        state->reset_epoch_s = seconds_ceil(now_ms + ms);
        state->result = Result::kRejected;
        state->stage = RequestState::Stage::kDecided;
        return true;
    }

    return false;
}

void take_counts(RequestState *state, const ScriptReply &reply)
{
    state->now_ms = reply.now_ms;
    state->stage = RequestState::Stage::kDecided;

    if (state->peek) {
        state->result = Result::kPeeked;
        return;
    }

    const Policy *policies[kMaxZonesPerRequest];
    bool enforcing[kMaxZonesPerRequest];

    for (ngx_uint_t i = 0; i < state->zones; i++) {
        policies[i] = &state->refs[i]->zone->policy;
        enforcing[i] = enforced(state, i);
    }

    std::optional<Verdict> verdict = decide(policies, enforcing, state->counts,
                                            state->zones, reply.now_ms,
                                            reply.rejected);

    if (!verdict) {
        fail(state, "unexpected reply from redis");
        return;
    }

    state->verdict = *verdict;
    state->reset_epoch_s = seconds_ceil(reply.now_ms
                                        + state->verdict.status.reset_ms);

    DenyCache *denied = main_conf(state->r)->denied;
    const Verdict &v = state->verdict;

    switch (v.outcome) {
    case Outcome::kRejected:
        state->result = Result::kRejected;
        // Measured from when the call left, not from now: Redis decided
        // after that, so the remembered rejection never outlasts its own.
        if (denied != nullptr && v.status.reset_ms > 0) {
            denied->deny(zone_key(state, v.zone),
                         state->sent_msec + v.status.reset_ms);
        }
        break;
    case Outcome::kRejectedDryRun:
        state->result = Result::kRejectedDryRun;
        break;
    case Outcome::kPassed:
        state->result = Result::kPassed;
        break;
    }
}

void on_wake(ngx_event_t *ev) noexcept
{
    auto *state = static_cast<RequestState *>(ev->data);

    if (ev->timedout) {
        ev->timedout = 0;

        if (state->pending != nullptr) {
            state->pending->state = nullptr;
            state->pending = nullptr;
        }

        MainConf *mcf = main_conf(state->r);
        u_char text[NGX_INT_T_LEN + 16];
        u_char *end = ngx_sprintf(text, " after %M ms", mcf->redis->timeout);
        fail(state, "redis timed out",
             {reinterpret_cast<char *>(text),
              static_cast<size_t>(end - text)});
        mcf->link->on_request_timeout();
    }

    // The framing of an nginx request event handler: the request may be
    // finalized by resume(), the connection outlives it.
    ngx_http_request_t *r = state->r;
    ngx_connection_t *c = r->connection;

    ngx_http_set_log_request(c->log, r);
    state->resume(state);
    ngx_http_run_posted_requests(c);
}

}  // namespace

bool build_call(ngx_http_request_t *r, RequestState *state,
                const MainConf *mcf) noexcept
{
    ngx_uint_t zones = state->zones;
    int argc = kLeadArgs + 1 + static_cast<int>(zones * (1 + kArgsPerZone));
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

    const char **keys = argv + kLeadArgs;
    size_t *key_len = len + kLeadArgs;
    const char **mode = keys + zones;
    size_t *mode_len = key_len + zones;

    *mode = state->peek ? kPeek : kCount;
    *mode_len = state->peek ? sizeof(kPeek) - 1 : sizeof(kCount) - 1;

    std::string_view prefix = view(mcf->prefix);

    for (ngx_uint_t i = 0; i < zones; i++) {
        const Zone *zone = state->refs[i]->zone;
        std::string_view name = view(zone->name);
        std::string_view subject = view(state->subjects[i]);
        auto *key = static_cast<char *>(ngx_pnalloc(
            r->pool, subject_key_size(prefix, name, subject)));

        if (key == nullptr) {
            return false;
        }

        keys[i] = key;
        key_len[i] = write_subject_key(prefix, name, subject, key);

        const char **a = mode + 1 + i * kArgsPerZone;
        size_t *l = mode_len + 1 + i * kArgsPerZone;

        for (int k = 0; k < kZoneArgs; k++) {
            a[k] = reinterpret_cast<const char *>(zone->args[k].data);
            l[k] = zone->args[k].len;
        }

        a[kZoneArgs] = enforced(state, i) ? kEnforce : kDryRun;
        l[kZoneArgs] = 1;
    }

    state->argc = argc;
    state->argv = argv;
    state->argvlen = len;
    return true;
}

bool send_call(RequestState *state) noexcept
{
    MainConf *mcf = main_conf(state->r);

    state->wake.handler = on_wake;
    state->wake.data = state;
    state->wake.log = state->r->connection->log;

    if (!state->peek && mcf->denied != nullptr
        && reject_from_memory(state, *mcf->denied))
    {
        return false;
    }

    // Waiting from before the send: a failing write inside send() hands
    // this call its NULL reply at once, and it must be taken.
    state->stage = RequestState::Stage::kWaiting;
    state->sent_msec = ngx_current_msec;

    RedisLink::SendResult sent =
        mcf->link == nullptr
        ? RedisLink::SendResult::kDown
        : mcf->link->send(state, state->argc, state->argv, state->argvlen);

    if (sent == RedisLink::SendResult::kSaturated) {
        fail(state, "too many calls in flight to redis");
        return false;
    }

    if (sent != RedisLink::SendResult::kSent) {
        fail(state, "redis is not connected");
        return false;
    }

    // Unless already decided (see above: the wake event is posted then).
    if (state->stage == RequestState::Stage::kWaiting) {
        ngx_add_timer(&state->wake, mcf->redis->timeout);
    }

    return true;
}

void on_script_reply(RequestState *state, const redisReply *reply) noexcept
{
    if (state->stage != RequestState::Stage::kWaiting) {
        return;
    }

    ScriptReply decoded = decode_script_reply(reply, state->zones,
                                              state->counts);

    switch (decoded.kind) {
    case ScriptReply::Kind::kVerdict:
        take_counts(state, decoded);
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

            if (link->send(state, state->argc, state->argv, state->argvlen)
                == RedisLink::SendResult::kSent)
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

    // Resumed from the event loop, not from here inside hiredis: the
    // request may go on to anything, and the Redis context must not be
    // under it.
    ngx_post_event(&state->wake, &ngx_posted_events);
}

}  // namespace ratelimit
