#include "rate/script_call.hpp"

#include "rate/call_batch.hpp"
#include "worker/worker_objects.hpp"
#include "limits/deny_cache.hpp"
#include "local/local_decision.hpp"
#include "local/local_memory.hpp"
#include "limits/algorithms.hpp"
#include "metrics/metrics.hpp"
#include "redis/redis_link.hpp"
#include "limits/sliding_window.hpp"
#include "rate/reservations.hpp"

#include <algorithm>

namespace ratelimit {

namespace {

// Logs why the request gets the fail policy, at most once a second.
void fail_log(RequestState *state, const char *why, std::string_view detail)
{
    RedisLink *link = worker_objects().link;

    state->result = Result::kError;

    if (link != nullptr && !link->may_log()) {
        return;
    }

    const char *outcome = state->peek ? "answered 503"
                          : state->lcf->fail == kFailClosed
                          ? "request rejected"
                          : state->lcf->fail == kFailLocal
                          ? "request decided locally" : "request passed";

    LoggedText text(detail);
    ngx_log_error(NGX_LOG_WARN, state->r->connection->log, 0,
                  "ratelimit: %s%V, %s", why, text.str(), outcome);
}

void decide_as_failed(RequestState *state, const char *why,
                      std::string_view detail = {})
{
    fail_log(state, why, detail);
    state->stage = RequestState::Stage::kDecided;
}

// A part of the call got no verdict: the request's is ERROR, decided once
// every part is in (the others may still wait, and the request with them).
void fail_part(RequestState *state, const char *why,
               std::string_view detail = {})
{
    fail_log(state, why, detail);
    state->part_failed = true;
}

// The room of the request in zone i, as the memory of rejections compares
// them (DenyCache::room()): a GCRA zone's is counted in its turns, of
// which a request has 1 + burst at once.  None (false) in a zone whose
// count may fall before its reset (its settles give units back), nor in a
// GCRA zone whose limit is a variable: its turns have no fixed length.
bool deny_room(const RequestState *state, ngx_uint_t i, std::int64_t *room)
{
    const Zone &zone = *state->refs[i]->zone;
    Policy policy = sent_policy_of(state, i);
    const AlgorithmRow &row = row_of(policy);

    if (zone.gives_back || (row.takes_turns && zone.limit_value != nullptr)) {
        return false;
    }

    *room = DenyCache::room(row.quota(policy), state->costs[i]);
    return true;
}

// The room a request of zone i asks the memory of rejections with: its
// own (deny_room()); of a zone whose rejections by its limit are not
// remembered but whose bans are, kBanRoom, which only a ban answers.
bool asked_room(const RequestState *state, ngx_uint_t i, std::int64_t *room)
{
    if (deny_room(state, i, room)) {
        return true;
    }

    *room = DenyCache::kBanRoom;
    return state->refs[i]->zone->ban_ms > 0;
}

// A rejection this worker remembers, answered without asking Redis.
bool reject_from_memory(RequestState *state, const DenyCache &denied)
{
    for (ngx_uint_t i = 0; i < state->zones; i++) {
        std::uint64_t reset_epoch_s = 0;
        std::uint64_t quota = DenyCache::kNoQuota;
        std::int64_t room = 0;
        bool banned = false;
        std::uint64_t ms = enforced(state, i) && asked_room(state, i, &room)
                           ? denied.denied_for(view(state->keys[i]), room,
                                               ngx_current_msec,
                                               &reset_epoch_s, &quota,
                                               &banned)
                           : 0;

        if (ms == 0) {
            continue;
        }

        // Decided now, on nginx's clock: a calendar zone's w is that of
        // the period now is in, not the first the call names (in the
        // first half of a period, the one before).
        Policy policy = policy_of(state, i);
        state->now_ms = wall_clock_ms();
        state->verdict = {Outcome::kRejected, i,
                          {quota != DenyCache::kNoQuota
                               ? quota : row_of(policy).quota(policy),
                           0, ms}};
        state->reset_epoch_s = reset_epoch_s;
        state->result = Result::kRejected;
        state->banned = banned;
        metrics::record_deny_cache_hit(state->refs[i]->zone->index);

        if (banned) {
            metrics::record_banned_request(state->refs[i]->zone->index);
        }

        state->stage = RequestState::Stage::kDecided;
        return true;
    }

    return false;
}

// How long an admitted request waits for its turn in its GCRA zones: the
// longest of their waits.  A dry run waits for none, as in limit_req.
ngx_msec_t turn_wait_ms(const RequestState *state)
{
    std::uint64_t wait_ms = 0;

    for (ngx_uint_t i = 0; i < state->zones; i++) {
        Policy policy = policy_of(state, i);

        if (enforced(state, i)) {
            wait_ms = std::max(wait_ms, row_of(policy).wait_ms(
                                            policy, state->counts[i].total,
                                            state->costs[i],
                                            state->refs[i]->delay));
        }
    }

    return static_cast<ngx_msec_t>(wait_ms);
}

// Keeps an override Redis told of where fail local shares it out (see
// local/local_memory.hpp).
void note_local_override(const RequestState *state, ngx_uint_t i)
{
    ngx_shm_zone_t *local = main_conf(state->r)->local_zone;
    const Override &o = state->counts[i].override;

    if (local != nullptr && o.set) {
        local::note_override(local, view(state->keys[i]),
                             override_in_window(sent_policy_of(state, i), o),
                             o.left_ms, wall_clock_ms());
    }
}

// The bans Redis told of in the request's enforced zones: counted where
// this request set one, and remembered until their end for every request
// of the subject, whatever its cost (measured from when the call left, as
// a rejection is); a request refused by one is BANNED.
void note_bans(RequestState *state, DenyCache *denied)
{
    for (ngx_uint_t i = 0; i < state->zones; i++) {
        const ZoneCount &count = state->counts[i];

        if (count.ban_left_ms == 0 || !enforced(state, i)) {
            continue;
        }

        ngx_uint_t zone = state->refs[i]->zone->index;

        if (count.ban_set_ms > 0) {
            metrics::record_ban(zone);
        } else if (state->verdict.outcome == Outcome::kRejected
                   && state->verdict.zone == i)
        {
            state->banned = true;
            metrics::record_banned_request(zone);
        }

        if (denied != nullptr) {
            // An override's limit is every request's, as for a rejection.
            Policy policy = policy_of(state, i);
            denied->deny(view(state->keys[i]), DenyCache::kBanRoom,
                         state->sent_msec,
                         state->sent_msec + count.ban_left_ms,
                         seconds_ceil(state->now_ms + count.ban_left_ms),
                         count.override.set ? row_of(policy).quota(policy)
                                            : DenyCache::kNoQuota);
        }
    }
}

void take_counts(RequestState *state, std::uint64_t now_ms,
                 const ScriptReply &reply)
{
    state->now_ms = now_ms;
    state->stage = RequestState::Stage::kDecided;

    if (state->peek) {
        state->result = Result::kPeeked;
        return;
    }

    Policy applied[kMaxZonesPerRequest];
    const Policy *policies[kMaxZonesPerRequest];
    bool enforcing[kMaxZonesPerRequest];

    for (ngx_uint_t i = 0; i < state->zones; i++) {
        applied[i] = policy_of(state, i);
        policies[i] = &applied[i];
        enforcing[i] = enforced(state, i);
        note_local_override(state, i);
    }

    std::optional<Verdict> verdict = decide_verdict(policies, enforcing,
                                                    state->counts,
                                                    state->zones, now_ms,
                                                    reply.rejected);

    if (!verdict) {
        decide_as_failed(state, "unexpected reply from redis");
        return;
    }

    state->verdict = *verdict;
    state->reset_epoch_s = seconds_ceil(now_ms
                                        + state->verdict.status.reset_ms);

    DenyCache *denied = worker_objects().denied;
    const Verdict &v = state->verdict;

    note_bans(state, denied);

    switch (v.outcome) {
    case Outcome::kRejected:
        state->result = Result::kRejected;
        // Measured from when the call left, not from now: Redis decided
        // after that, so the remembered rejection never outlasts its own,
        // nor the override it was made under (a raised or removed one is
        // forgiven: rate/forgive_listener.hpp; and not remembered if that
        // came after the call left: limits/deny_cache.hpp).  A ban is
        // remembered by note_bans().
        if (std::int64_t room; denied != nullptr && v.status.reset_ms > 0
                                && state->counts[v.zone].ban_left_ms == 0
                                && deny_room(state, v.zone, &room))
        {
            const Override &o = state->counts[v.zone].override;
            std::uint64_t hold_ms = o.set && o.left_ms > 0
                                    ? std::min(v.status.reset_ms, o.left_ms)
                                    : v.status.reset_ms;
            // An override's limit is every request's of the subject, so
            // an answer from memory gives it; without, each request's own.
            denied->deny(view(state->keys[v.zone]), room, state->sent_msec,
                         state->sent_msec + hold_ms, state->reset_epoch_s,
                         o.set ? v.status.limit : DenyCache::kNoQuota);
        }
        break;
    case Outcome::kRejectedDryRun:
        state->result = Result::kRejectedDryRun;
        state->reserved = true;
        break;
    case Outcome::kPassed:
        state->result = Result::kPassed;
        state->reserved = true;
        state->delay_ms = turn_wait_ms(state);
        break;
    }
}

void on_wake(ngx_event_t *ev) noexcept
{
    auto *state = static_cast<RequestState *>(ev->data);

    if (ev->timedout) {
        ev->timedout = 0;

        CallBatcher::forget(state);
        metrics::record_link_error(LinkError::kTimeout);

        MainConf *mcf = main_conf(state->r);
        u_char text[NGX_INT_T_LEN + 16];
        u_char *end = ngx_sprintf(text, " after %M ms", mcf->redis->timeout);
        decide_as_failed(state, "redis timed out",
                         {reinterpret_cast<char *>(text),
                          static_cast<size_t>(end - text)});
        worker_objects().link->on_request_timeout();
    }

    resume_request(state, state->resume);
}

// Resumes the request from the event loop, not from inside hiredis where
// its reply is taken: the request may go on to anything, and the Redis
// context must not be under it.
void wake_up(RequestState *state)
{
    stop_timer(&state->wake);

    ngx_post_event(&state->wake, &ngx_posted_events);
}

// Every part of the call is answered, or failed: the request's verdict.
void part_done(RequestState *state)
{
    if (--state->parts_waiting > 0) {
        return;
    }

    if (state->part_failed) {
        state->stage = RequestState::Stage::kDecided;
    } else {
        ScriptReply merged{ScriptReply::Kind::kVerdict, false, {}};
        std::uint64_t now_ms = 0;

        for (ngx_uint_t p = 0; p < state->parts; p++) {
            merged.rejected |= state->part[p].rejected;
            now_ms = ngx_max(now_ms, state->part[p].now_ms);
        }

        take_counts(state, now_ms, merged);

        if (merged.rejected && state->parts > 1 && !state->peek) {
            take_back_reservations(state);
        }
    }

    wake_up(state);
}

void take_part_reply(RequestState *state, ngx_uint_t p, std::uint64_t now_ms,
                     const Reply *reply, Told told) noexcept
{
    RequestState::Part &part = state->part[p];
    ZoneCount counts[kMaxZonesPerRequest];
    ScriptReply decoded = decode_script_reply(reply, part.zones, counts,
                                              state->interval_buckets
                                              != nullptr, told);

    // An override or a ban only of a zone that reads them.
    for (ngx_uint_t j = 0; j < part.zones; j++) {
        if ((counts[j].override.set || counts[j].ban_left_ms > 0)
            && state->refs[part.zone[j]]->zone->side_base.len == 0)
        {
            decoded.kind = ScriptReply::Kind::kMalformed;
        }
    }

    switch (decoded.kind) {
    case ScriptReply::Kind::kVerdict:
        for (ngx_uint_t j = 0; j < part.zones; j++) {
            state->counts[part.zone[j]] = counts[j];
        }
        part.now_ms = now_ms;
        part.answered = true;
        part.rejected = decoded.rejected;
        break;
    case ScriptReply::Kind::kError:
        metrics::record_link_error(LinkError::kErrorReply);
        fail_part(state, "redis answered an error: ", decoded.error);
        tell_link_of_script_error(worker_objects().link, decoded.error);
        break;
    case ScriptReply::Kind::kMalformed:
        fail_part(state, "unexpected reply from redis");
        break;
    }

    part_done(state);
}

void part_failed(RequestState *state, const char *why,
                 std::string_view detail) noexcept
{
    fail_part(state, why, detail);
    part_done(state);
}

}  // namespace

bool build_keys(RequestState *state) noexcept
{
    for (ngx_uint_t i = 0; i < state->zones; i++) {
        if (!make_subject_key(state->r, *state->refs[i]->zone,
                              state->subjects[i], &state->keys[i]))
        {
            return false;
        }
    }

    return true;
}

bool send_call(RequestState *state) noexcept
{
    MainConf *mcf = main_conf(state->r);

    state->wake.handler = on_wake;
    state->wake.data = state;
    state->wake.log = state->r->connection->log;

    WorkerObjects &worker = worker_objects();

    if (!state->peek && worker.denied != nullptr
        && reject_from_memory(state, *worker.denied))
    {
        return false;
    }

    // Redis is known to be unreachable: decided locally, by act_on().
    if (deciding_locally(state)) {
        state->result = Result::kError;
        state->stage = RequestState::Stage::kDecided;
        return false;
    }

    // Waiting from before the queueing: a batch it fills is sent at once,
    // and a failing write hands the batch its NULL reply, to be taken.
    state->stage = RequestState::Stage::kWaiting;
    state->sent_msec = ngx_current_msec;

    switch (worker.calls == nullptr ? CallBatcher::QueueResult::kDown
                                    : worker.calls->queue(state))
    {
    case CallBatcher::QueueResult::kQueued:
        break;
    case CallBatcher::QueueResult::kSaturated:
        decide_as_failed(state, "too many calls in flight to redis");
        return false;
    case CallBatcher::QueueResult::kNoMemory:
        decide_as_failed(state, "no memory for the call to redis");
        return false;
    case CallBatcher::QueueResult::kDown:
        decide_as_failed(state, "redis is not connected");
        return false;
    }

    // Unless already decided (see above: the wake event is posted then).
    if (state->stage == RequestState::Stage::kWaiting) {
        ngx_add_timer(&state->wake, mcf->redis->timeout);
    }

    return true;
}

const BatchSink &rate_reply_sink() noexcept
{
    static const BatchSink sink = {take_part_reply, part_failed};
    return sink;
}

}  // namespace ratelimit
