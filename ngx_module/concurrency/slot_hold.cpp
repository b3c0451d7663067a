#include "concurrency/slot_hold.hpp"

#include <new>

#include "metrics/metrics.hpp"
#include "redis/redis_link.hpp"
#include "concurrency/slot_gate.hpp"
#include "worker/worker_objects.hpp"

namespace ratelimit {

namespace {

void on_slot_answer(void *waiter, const SlotReply *reply) noexcept;
void recheck_slot(SlotHold *hold) noexcept;

SlotHold *hold_of(SlotWaiter *waiter)
{
    return reinterpret_cast<SlotHold *>(
        reinterpret_cast<char *>(waiter) - offsetof(SlotHold, waiter));
}

void detach(SlotHold *hold)
{
    if (hold->call != nullptr) {
        hold->call->waiter = nullptr;
        hold->call = nullptr;
    }
}

bool queued(const SlotHold *hold)
{
    return hold->phase == SlotHold::Phase::kQueued
           || hold->phase == SlotHold::Phase::kChecking;
}

bool admitted(SlotOutcome outcome)
{
    return outcome == SlotOutcome::kAdmitted
           || outcome == SlotOutcome::kAdmittedAfterWait;
}

void record_outcome(const SlotHold *hold)
{
    bool closed = hold->state->lcf->fail == kFailClosed;
    Decision decision = Decision::kPassed;
    SlotEvent event = SlotEvent::kCount;

    switch (hold->outcome) {
    case SlotOutcome::kAdmitted:
        event = SlotEvent::kAdmitted;
        break;
    case SlotOutcome::kAdmittedAfterWait:
        event = SlotEvent::kAdmittedAfterWait;
        break;
    case SlotOutcome::kQueueFull:
        decision = Decision::kRejected;
        event = SlotEvent::kQueueFull;
        break;
    case SlotOutcome::kTimedOut:
        decision = Decision::kRejected;
        event = SlotEvent::kWaitTimeout;
        break;
    case SlotOutcome::kDryRun:
        decision = Decision::kRejectedDryRun;
        break;
    case SlotOutcome::kError:
    case SlotOutcome::kPending:
        decision = closed ? Decision::kErrorRejected : Decision::kError;
        break;
    }

    metrics::record_slot_outcome(hold->ref->zone->index, decision, event,
                                 hold->state->check_start_us, hold->queue_ms);
}

// The outcome, without resuming the request: the caller does.
void settle(SlotHold *hold, SlotOutcome outcome)
{
    if (queued(hold)) {
        metrics::record_slot_queued(hold->ref->zone->index, false);
    }

    hold->outcome = outcome;
    hold->gate->remove_waiter(&hold->waiter);
    stop_timer(&hold->deadline);
    stop_timer(&hold->timer);
    hold->phase = SlotHold::Phase::kOut;

    if (admitted(outcome)) {
        hold->phase = SlotHold::Phase::kHeld;
        ngx_add_timer(&hold->timer, hold->policy->lease_ms / 3);
    }

    record_outcome(hold);
}

// Resumes the request from the event loop, never from inside a reply on
// the data link, which the request may go on to use.
void resume_later(SlotHold *hold)
{
    ngx_post_event(&hold->done, &ngx_posted_events);
}

void decide_slot(SlotHold *hold, SlotOutcome outcome)
{
    settle(hold, outcome);
    resume_later(hold);
}

void log_failure(SlotHold *hold, const char *why, std::string_view detail)
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

void slot_failed(SlotHold *hold, const char *why, std::string_view detail = {})
{
    detach(hold);
    log_failure(hold, why, detail);
    decide_slot(hold, SlotOutcome::kError);
}

// Gives the slot or the place back, if Redis may hold one; nobody waits
// for the answer.
void give_back(SlotHold *hold)
{
    if (hold->in_redis) {
        hold->in_redis = false;
        hold->gate->send(SlotOp::kRelease, nullptr, nullptr,
                         view(hold->key), hold->seq, hold->policy, false);
    }
}

void wait_in_queue(SlotHold *hold)
{
    ngx_msec_t waited = ngx_current_msec - hold->asked_msec;
    ngx_msec_t timeout = hold->policy->queue_timeout_ms;

    hold->phase = SlotHold::Phase::kQueued;
    hold->gate->add_waiter(&hold->waiter, hold->seq);
    ngx_add_timer(&hold->deadline, waited < timeout ? timeout - waited : 1);
    ngx_add_timer(&hold->timer, kRecheckMs);
    metrics::record_slot_queued(hold->ref->zone->index, true);
}

// From the slot's release (by the releasing worker's clock, as the wake-up
// said) to now.  Clocks of two servers may disagree: a hand-off "before"
// its release counts as 0.  Unknown when no wake-up came.
void time_handoff(SlotHold *hold)
{
    if (hold->hinted_freed_us != 0) {
        std::uint64_t now_us = wall_clock_us();
        hold->handoff_us = now_us > hold->hinted_freed_us
                           ? now_us - hold->hinted_freed_us : 0;
    }
}

// The caller resumes the request.
void granted_after_wait(SlotHold *hold)
{
    detach(hold);
    hold->queue_ms = ngx_current_msec - hold->asked_msec;
    settle(hold, SlotOutcome::kAdmittedAfterWait);
}

void on_hold_timer(ngx_event_t *ev) noexcept
{
    auto *hold = static_cast<SlotHold *>(ev->data);
    RedisLink *link = hold->gate->link();

    switch (hold->phase) {
    case SlotHold::Phase::kAsking:
    case SlotHold::Phase::kChecking:
        metrics::record_link_error(LinkError::kTimeout);
        slot_failed(hold, "redis timed out", {});
        link->on_request_timeout();
        break;

    case SlotHold::Phase::kQueued:
        recheck_slot(hold);
        break;

    case SlotHold::Phase::kHeld:
        hold->gate->send(SlotOp::kRenew, nullptr, nullptr, view(hold->key),
                         hold->seq, hold->policy, false);
        ngx_add_timer(&hold->timer, hold->policy->lease_ms / 3);
        break;

    case SlotHold::Phase::kOut:
        break;
    }
}

void on_deadline(ngx_event_t *ev) noexcept
{
    auto *hold = static_cast<SlotHold *>(ev->data);

    detach(hold);
    hold->queue_ms = ngx_current_msec - hold->asked_msec;
    give_back(hold);
    decide_slot(hold, SlotOutcome::kTimedOut);
}

void on_hold_done(ngx_event_t *ev) noexcept
{
    auto *hold = static_cast<SlotHold *>(ev->data);
    resume_request(hold->state, hold->decided);
}

// The request is gone: whatever it holds or waits for in Redis goes back.
void cleanup_hold(void *data) noexcept
{
    auto *hold = static_cast<SlotHold *>(data);

    stop_timer(&hold->timer);
    stop_timer(&hold->deadline);

    if (hold->done.posted) {
        ngx_delete_posted_event(&hold->done);
    }

    detach(hold);

    if (queued(hold)) {
        metrics::record_slot_queued(hold->ref->zone->index, false);
        metrics::record_slot_event(hold->ref->zone->index,
                                   SlotEvent::kGoneWhileQueued);
    }

    release_slot(hold);
    hold->gate->remove_waiter(&hold->waiter);
    give_back(hold);
    hold->phase = SlotHold::Phase::kOut;
}

// Unlike the module's own events (init_event), not cancelable: a worker
// exiting gracefully waits for its requests, and their timers with them.
void init_hold_event(ngx_event_t *ev, ngx_event_handler_pt handler,
                     SlotHold *hold)
{
    ev->handler = handler;
    ev->data = hold;
    ev->log = hold->state->r->connection->log;
}

void on_slot_answer(void *waiter, const SlotReply *reply) noexcept
{
    auto *hold = static_cast<SlotHold *>(waiter);

    hold->call = nullptr;
    stop_timer(&hold->timer);

    bool checking = hold->phase == SlotHold::Phase::kChecking;

    if (reply == nullptr || reply->kind != SlotReply::Kind::kAnswer) {
        if (reply == nullptr) {
            slot_failed(hold, "lost connection to redis");
        } else if (reply->kind == SlotReply::Kind::kMalformed) {
            slot_failed(hold, "unexpected reply from redis");
        } else {
            metrics::record_link_error(LinkError::kErrorReply);
            slot_failed(hold, "redis answered an error: ", reply->error);
            hold->gate->link()->on_error_reply(reply->error);
        }
        return;
    }

    switch (reply->code) {
    case SlotCode::kHeld:
        if (checking) {
            time_handoff(hold);
            granted_after_wait(hold);
            resume_later(hold);
        } else {
            decide_slot(hold, SlotOutcome::kAdmitted);
        }
        return;

    case SlotCode::kQueued:
        if (checking) {
            hold->phase = SlotHold::Phase::kQueued;

            if (hold->hinted_again) {
                hold->hinted_again = false;
                recheck_slot(hold);
            } else {
                ngx_add_timer(&hold->timer, kRecheckMs);
            }
        } else {
            wait_in_queue(hold);
        }
        return;

    case SlotCode::kRefused:
        hold->in_redis = false;
        if (checking) {
            // Redis dropped the waiter: past queue_timeout by its clock.
            hold->queue_ms = ngx_current_msec - hold->asked_msec;
            decide_slot(hold, SlotOutcome::kTimedOut);
        } else {
            decide_slot(hold, hold->ref->dry_run || hold->state->lcf->dry_run
                              ? SlotOutcome::kDryRun
                              : SlotOutcome::kQueueFull);
        }
        return;

    case SlotCode::kWouldWait:
        hold->in_redis = false;
        decide_slot(hold, SlotOutcome::kDryRun);
        return;
    }
}

// A message on the worker's channel names the waiter.  Signed with the
// fleet's wake key, it is Redis's word that the slot is the waiter's (the
// script moved it to `held` before it published): the request resumes at
// once, from the subscription's own event, which the request never sends
// to or closes (a posted event would run only after every other event of
// the loop turn).  Anyone who may PUBLISH on that Redis can send an
// unsigned one (a fleet without a key sends only those): a hint, never a
// grant.  The waiter then asks Redis at once (a check), and only the
// check's answer admits it.  A hint that comes while a check is out may
// postdate what that check saw: it asks again when that check says
// "queued".  The release's time the message carries (`freed_us`) only
// times the hand-off of a slot that is the waiter's.
void on_slot_woken(SlotWaiter *waiter, std::uint64_t freed_us,
                   bool is_signed) noexcept
{
    SlotHold *hold = hold_of(waiter);

    if (!queued(hold)) {
        return;
    }

    hold->hinted_freed_us = freed_us;

    if (is_signed) {
        time_handoff(hold);
        granted_after_wait(hold);
        resume_request(hold->state, hold->decided);
        return;
    }

    if (hold->phase == SlotHold::Phase::kChecking) {
        hold->hinted_again = true;
        return;
    }

    recheck_slot(hold);
}

void recheck_slot(SlotHold *hold) noexcept
{
    if (hold->phase != SlotHold::Phase::kQueued) {
        return;
    }

    stop_timer(&hold->timer);
    hold->phase = SlotHold::Phase::kChecking;
    hold->call = hold->gate->send(SlotOp::kCheck, on_slot_answer, hold,
                                  view(hold->key), hold->seq, hold->policy,
                                  false);

    if (hold->call == nullptr) {
        slot_failed(hold, "redis is not connected");
        return;
    }

    ngx_add_timer(&hold->timer, main_conf(hold->state->r)->redis->timeout);
}

void on_slot_recheck(SlotWaiter *waiter) noexcept
{
    recheck_slot(hold_of(waiter));
}

}  // namespace

bool start_slot(RequestState *state, const ZoneRef *ref,
                const ngx_str_t &subject,
                void (*decided)(RequestState *state) noexcept) noexcept
{
    ngx_http_request_t *r = state->r;
    MainConf *mcf = main_conf(r);
    ngx_str_t key;
    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(r->pool, sizeof(SlotHold));

    if (!make_subject_key(r, *ref->zone, subject, &key) || cln == nullptr
        || worker_objects().slots == nullptr)
    {
        return false;
    }

    auto *hold = new (cln->data) SlotHold();
    hold->state = state;
    hold->ref = ref;
    hold->policy = ref->zone->concurrency;
    hold->gate = worker_objects().slots;
    hold->subject = subject;
    hold->key = key;
    hold->seq = hold->gate->next_seq();
    hold->decided = decided;
    hold->asked_msec = ngx_current_msec;
    hold->handoff_us = kUnknownHandoff;
    hold->waiter.woken = on_slot_woken;
    hold->waiter.recheck = on_slot_recheck;
    init_hold_event(&hold->timer, on_hold_timer, hold);
    init_hold_event(&hold->deadline, on_deadline, hold);
    init_hold_event(&hold->done, on_hold_done, hold);
    cln->handler = cleanup_hold;
    state->hold = hold;

    bool dry_run = ref->dry_run || state->lcf->dry_run;

    hold->phase = SlotHold::Phase::kAsking;
    hold->call = hold->gate->send(SlotOp::kAcquire, on_slot_answer, hold,
                                  view(hold->key), hold->seq, hold->policy,
                                  dry_run);

    if (hold->call == nullptr) {
        log_failure(hold, "redis is not connected", {});
        settle(hold, SlotOutcome::kError);
        return false;
    }

    hold->in_redis = true;
    ngx_add_timer(&hold->timer, mcf->redis->timeout);
    return true;
}

void release_slot(SlotHold *hold) noexcept
{
    if (hold->phase != SlotHold::Phase::kHeld) {
        return;
    }

    stop_timer(&hold->timer);
    metrics::record_slot_freed(hold->ref->zone->index,
                               response_succeeded(hold->state->r),
                               hold->state->check_start_us);
    give_back(hold);
    hold->phase = SlotHold::Phase::kOut;
}

}  // namespace ratelimit
