#include "concurrency/permit_hold.hpp"

#include <new>

#include "metrics/metrics.hpp"
#include "redis/redis_link.hpp"
#include "concurrency/permit_gate.hpp"
#include "worker/worker_objects.hpp"

namespace ratelimit {

namespace {

void on_permit_answer(void *waiter, const PermitReply *reply) noexcept;
void recheck_permit(PermitHold *hold) noexcept;

PermitHold *hold_of(PermitWaiter *waiter)
{
    return reinterpret_cast<PermitHold *>(
        reinterpret_cast<char *>(waiter) - offsetof(PermitHold, waiter));
}

void detach(PermitHold *hold)
{
    if (hold->call != nullptr) {
        hold->call->waiter = nullptr;
        hold->call = nullptr;
    }
}

bool queued(const PermitHold *hold)
{
    return hold->phase == PermitHold::Phase::kQueued
           || hold->phase == PermitHold::Phase::kChecking;
}

// The gate's waiter: from the ask to the outcome.
bool waiting(const PermitHold *hold)
{
    return hold->phase == PermitHold::Phase::kAsking || queued(hold);
}

bool admitted(PermitOutcome outcome)
{
    return outcome == PermitOutcome::kAdmitted
           || outcome == PermitOutcome::kAdmittedAfterWait;
}

void record_outcome(const PermitHold *hold)
{
    bool closed = hold->state->lcf->fail == kFailClosed;
    Decision decision = Decision::kPassed;
    PermitEvent event = PermitEvent::kCount;

    switch (hold->outcome) {
    case PermitOutcome::kAdmitted:
        event = PermitEvent::kAdmitted;
        break;
    case PermitOutcome::kAdmittedAfterWait:
        event = PermitEvent::kAdmittedAfterWait;
        break;
    case PermitOutcome::kQueueFull:
        decision = Decision::kRejected;
        event = PermitEvent::kQueueFull;
        break;
    case PermitOutcome::kTimedOut:
        decision = Decision::kRejected;
        event = PermitEvent::kWaitTimeout;
        break;
    case PermitOutcome::kDryRun:
        decision = Decision::kRejectedDryRun;
        break;
    case PermitOutcome::kError:
    case PermitOutcome::kPending:
        decision = closed ? Decision::kErrorRejected : Decision::kError;
        break;
    }

    metrics::record_permit_outcome(hold->ref->zone->index, decision, event,
                                   hold->state->check_start_us, hold->queue_ms);
}

// The outcome, without resuming the request: the caller does.
void conclude(PermitHold *hold, PermitOutcome outcome)
{
    if (queued(hold)) {
        metrics::record_permit_queued(hold->ref->zone->index, false);
    }

    hold->outcome = outcome;
    hold->gate->remove_waiter(&hold->waiter);
    stop_timer(&hold->deadline);
    stop_timer(&hold->timer);
    hold->phase = PermitHold::Phase::kOut;

    if (admitted(outcome)) {
        hold->phase = PermitHold::Phase::kHeld;
        ngx_add_timer(&hold->timer, hold->policy->lease_ms / 3);
    }

    record_outcome(hold);
}

// Resumes the request from the event loop, never from inside a reply on
// the data link, which the request may go on to use.
void resume_later(PermitHold *hold)
{
    ngx_post_event(&hold->done, &ngx_posted_events);
}

void decide_permit(PermitHold *hold, PermitOutcome outcome)
{
    conclude(hold, outcome);
    resume_later(hold);
}

void log_failure(PermitHold *hold, const char *why, std::string_view detail)
{
    if (!hold->gate->link()->may_log()) {
        return;
    }

    LoggedText text(detail);
    ngx_log_error(NGX_LOG_WARN, hold->state->r->connection->log, 0,
                  "ratelimit: %s%V, concurrency zone \"%V\", %s", why,
                  text.str(), &hold->ref->zone->name,
                  hold->state->lcf->fail == kFailClosed ? "request rejected"
                                                        : "request passed");
}

void permit_failed(PermitHold *hold, const char *why,
                   std::string_view detail = {})
{
    detach(hold);
    log_failure(hold, why, detail);
    decide_permit(hold, PermitOutcome::kError);
}

// Gives the permit or the place back, if Redis may hold one; nobody waits
// for the answer.
void give_back(PermitHold *hold)
{
    if (hold->in_redis) {
        hold->in_redis = false;
        hold->gate->send(PermitOp::kRelease, nullptr, nullptr,
                         view(hold->key), hold->seq, hold->policy, false);
    }
}

void wait_in_queue(PermitHold *hold)
{
    ngx_msec_t waited = ngx_current_msec - hold->asked_msec;
    ngx_msec_t timeout = hold->policy->queue_timeout_ms;

    hold->phase = PermitHold::Phase::kQueued;
    ngx_add_timer(&hold->deadline, waited < timeout ? timeout - waited : 1);
    ngx_add_timer(&hold->timer, kRecheckMs);
    metrics::record_permit_queued(hold->ref->zone->index, true);
}

// From the permit's release (by the releasing worker's clock, as the wake-up
// said; else when Redis gave it, `given_ms`, as a check's answer said) to
// now.  Clocks of two servers may disagree: a hand-off "before" its release
// counts as 0.
void time_handoff(PermitHold *hold, std::uint64_t given_ms = 0)
{
    std::uint64_t freed_us = hold->hinted_freed_us != 0
                             ? hold->hinted_freed_us : given_ms * 1000;
    std::uint64_t now_us = wall_clock_us();

    if (freed_us != 0) {
        hold->handoff_us = now_us > freed_us ? now_us - freed_us : 0;
    }
}

// The caller resumes the request.
void granted_after_wait(PermitHold *hold)
{
    detach(hold);
    hold->queue_ms = ngx_current_msec - hold->asked_msec;
    conclude(hold, PermitOutcome::kAdmittedAfterWait);
}

void on_hold_timer(ngx_event_t *ev) noexcept
{
    auto *hold = static_cast<PermitHold *>(ev->data);
    RedisLink *link = hold->gate->link();

    switch (hold->phase) {
    case PermitHold::Phase::kAsking:
    case PermitHold::Phase::kChecking:
        metrics::record_link_error(LinkError::kTimeout);
        permit_failed(hold, "redis timed out", {});
        link->on_request_timeout();
        break;

    case PermitHold::Phase::kQueued:
        recheck_permit(hold);
        break;

    case PermitHold::Phase::kHeld:
        hold->gate->send(PermitOp::kRenew, nullptr, nullptr, view(hold->key),
                         hold->seq, hold->policy, false);
        ngx_add_timer(&hold->timer, hold->policy->lease_ms / 3);
        break;

    case PermitHold::Phase::kOut:
        break;
    }
}

void on_deadline(ngx_event_t *ev) noexcept
{
    auto *hold = static_cast<PermitHold *>(ev->data);

    detach(hold);
    hold->queue_ms = ngx_current_msec - hold->asked_msec;
    give_back(hold);
    decide_permit(hold, PermitOutcome::kTimedOut);
}

void on_hold_done(ngx_event_t *ev) noexcept
{
    auto *hold = static_cast<PermitHold *>(ev->data);
    resume_request(hold->state, hold->decided);
}

// The request is gone: whatever it holds or waits for in Redis goes back.
void cleanup_hold(void *data) noexcept
{
    auto *hold = static_cast<PermitHold *>(data);

    stop_timer(&hold->timer);
    stop_timer(&hold->deadline);

    if (hold->done.posted) {
        ngx_delete_posted_event(&hold->done);
    }

    detach(hold);

    if (queued(hold)) {
        metrics::record_permit_queued(hold->ref->zone->index, false);
        metrics::record_permit_event(hold->ref->zone->index,
                                     PermitEvent::kGoneWhileQueued);
    }

    release_permit(hold);
    hold->gate->remove_waiter(&hold->waiter);
    give_back(hold);
    hold->phase = PermitHold::Phase::kOut;
}

// Unlike the module's own events (init_event), not cancelable: a worker
// exiting gracefully waits for its requests, and their timers with them.
void init_hold_event(ngx_event_t *ev, ngx_event_handler_pt handler,
                     PermitHold *hold)
{
    ev->handler = handler;
    ev->data = hold;
    ev->log = hold->state->r->connection->log;
}

void on_permit_answer(void *waiter, const PermitReply *reply) noexcept
{
    auto *hold = static_cast<PermitHold *>(waiter);

    hold->call = nullptr;
    stop_timer(&hold->timer);

    bool checking = hold->phase == PermitHold::Phase::kChecking;

    if (reply == nullptr || reply->kind != PermitReply::Kind::kAnswer) {
        if (reply == nullptr) {
            permit_failed(hold, "lost connection to redis");
        } else if (reply->kind == PermitReply::Kind::kMalformed) {
            permit_failed(hold, "unexpected reply from redis");
        } else {
            metrics::record_link_error(LinkError::kErrorReply);
            permit_failed(hold, "redis answered an error: ", reply->error);
            hold->gate->link()->on_error_reply(reply->error);
        }
        return;
    }

    switch (reply->code) {
    case PermitCode::kHeld:
        if (checking) {
            time_handoff(hold, reply->number);
            granted_after_wait(hold);
            resume_later(hold);
        } else {
            decide_permit(hold, PermitOutcome::kAdmitted);
        }
        return;

    case PermitCode::kQueued:
        if (checking) {
            hold->phase = PermitHold::Phase::kQueued;
            ngx_add_timer(&hold->timer, kRecheckMs);
        } else {
            wait_in_queue(hold);
        }

        // The answer may predate a wake-up that came while it was out.
        if (hold->check_again) {
            hold->check_again = false;
            recheck_permit(hold);
        }
        return;

    case PermitCode::kRefused:
        hold->in_redis = false;
        if (checking) {
            // Redis dropped the waiter: past queue_timeout by its clock.
            hold->queue_ms = ngx_current_msec - hold->asked_msec;
            decide_permit(hold, PermitOutcome::kTimedOut);
        } else {
            decide_permit(hold, hold->ref->dry_run || hold->state->lcf->dry_run
                              ? PermitOutcome::kDryRun
                              : PermitOutcome::kQueueFull);
        }
        return;

    case PermitCode::kWouldWait:
        hold->in_redis = false;
        decide_permit(hold, PermitOutcome::kDryRun);
        return;
    }
}

// A message on the worker's channel names the waiter.  Signed with the
// fleet's wake key, it is Redis's word that the permit is the waiter's (the
// script moved it to `held` before it published): the request resumes at
// once, from the subscription's own event, which the request never sends
// to or closes (a posted event would run only after every other event of
// the loop turn), even before the answer to its ask: the script queued it
// before it gave it the permit.  Anyone who may PUBLISH on that Redis can
// send an unsigned one (a fleet without a key sends only those): a hint,
// never a grant.  The waiter then asks Redis at once (a check), and only
// the check's answer admits it.  A hint that comes while the ask or a
// check is out may postdate what that call saw: it asks again when that
// call says "queued".  The release's time the message carries
// (`freed_us`) only times the hand-off of a permit that is the waiter's.
void on_permit_woken(PermitWaiter *waiter, std::uint64_t freed_us,
                     bool is_signed) noexcept
{
    PermitHold *hold = hold_of(waiter);

    if (!waiting(hold)) {
        return;
    }

    hold->hinted_freed_us = freed_us;

    if (is_signed) {
        time_handoff(hold);
        granted_after_wait(hold);
        resume_request(hold->state, hold->decided);
        return;
    }

    if (hold->phase != PermitHold::Phase::kQueued) {
        hold->check_again = true;
        return;
    }

    recheck_permit(hold);
}

void recheck_permit(PermitHold *hold) noexcept
{
    if (hold->phase != PermitHold::Phase::kQueued) {
        return;
    }

    stop_timer(&hold->timer);
    hold->phase = PermitHold::Phase::kChecking;
    hold->call = hold->gate->send(PermitOp::kCheck, on_permit_answer, hold,
                                  view(hold->key), hold->seq, hold->policy,
                                  false);

    if (hold->call == nullptr) {
        permit_failed(hold, "redis is not connected");
        return;
    }

    ngx_add_timer(&hold->timer, main_conf(hold->state->r)->redis->timeout);
}

// The subscription was made again: a wake-up may have been lost.  A call
// out may have run before the loss: ask again once it says "queued".
void on_permit_recheck(PermitWaiter *waiter) noexcept
{
    PermitHold *hold = hold_of(waiter);

    if (hold->phase != PermitHold::Phase::kQueued) {
        hold->check_again = true;
        return;
    }

    recheck_permit(hold);
}

}  // namespace

bool start_permit(RequestState *state, const ZoneRef *ref,
                  const ngx_str_t &subject,
                  void (*decided)(RequestState *state) noexcept) noexcept
{
    ngx_http_request_t *r = state->r;
    MainConf *mcf = main_conf(r);
    ngx_str_t key;
    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(r->pool, sizeof(PermitHold));

    if (!make_subject_key(r, *ref->zone, subject, &key) || cln == nullptr
        || worker_objects().permits == nullptr)
    {
        return false;
    }

    auto *hold = new (cln->data) PermitHold();
    hold->state = state;
    hold->ref = ref;
    hold->policy = ref->zone->concurrency;
    hold->gate = worker_objects().permits;
    hold->subject = subject;
    hold->key = key;
    hold->seq = hold->gate->next_seq();
    hold->decided = decided;
    hold->asked_msec = ngx_current_msec;
    hold->handoff_us = kUnknownHandoff;
    hold->waiter.woken = on_permit_woken;
    hold->waiter.recheck = on_permit_recheck;
    init_hold_event(&hold->timer, on_hold_timer, hold);
    init_hold_event(&hold->deadline, on_deadline, hold);
    init_hold_event(&hold->done, on_hold_done, hold);
    cln->handler = cleanup_hold;
    state->hold = hold;

    bool dry_run = ref->dry_run || state->lcf->dry_run;

    hold->phase = PermitHold::Phase::kAsking;
    hold->gate->add_waiter(&hold->waiter, hold->seq);
    hold->call = hold->gate->send(PermitOp::kAcquire, on_permit_answer, hold,
                                  view(hold->key), hold->seq, hold->policy,
                                  dry_run);

    if (hold->call == nullptr) {
        log_failure(hold, "redis is not connected", {});
        conclude(hold, PermitOutcome::kError);
        return false;
    }

    hold->in_redis = true;
    ngx_add_timer(&hold->timer, mcf->redis->timeout);
    return true;
}

void release_permit(PermitHold *hold) noexcept
{
    if (hold->phase != PermitHold::Phase::kHeld) {
        return;
    }

    stop_timer(&hold->timer);
    metrics::record_permit_freed(hold->ref->zone->index,
                                 response_succeeded(hold->state->r),
                                 hold->state->check_start_us);
    give_back(hold);
    hold->phase = PermitHold::Phase::kOut;
}

}  // namespace ratelimit
