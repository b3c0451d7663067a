#include "rate/settle_queue.hpp"

#include <iterator>
#include <new>

#include "metrics/metrics.hpp"
#include "scripts/window_script.hpp"

namespace ratelimit {

Settle *make_settle(std::string_view key, const Policy &policy,
                    std::int64_t units, std::uint64_t bucket,
                    const Zone &zone) noexcept
{
    try {
        return new Settle{std::string(key), policy, units, bucket, &zone, 0,
                          0, nullptr};
    } catch (const std::bad_alloc &) {
        metrics::record_settle(zone.index, SettleOutcome::kDropped);
        return nullptr;
    }
}

SettleQueue::SettleQueue(const Sender &sender, ngx_msec_t timeout,
                         ngx_log_t *log) noexcept
    : sender_(sender), timeout_(timeout)
{
    init_event(&drain_, on_drain, this, log);
    drain_.cancelable = 0;
}

// Only when the worker exits: the settles never sent are dropped.
SettleQueue::~SettleQueue()
{
    stop_timer(&drain_);
    drop(take_waiting());
}

void SettleQueue::hold() noexcept
{
    if (held_++ == 0 && !drain_.timer_set) {
        ngx_add_timer(&drain_, timeout_);
    }
}

void SettleQueue::let_go() noexcept
{
    held_--;
}

void SettleQueue::wait(Settle *settle) noexcept
{
    if (waiting_count_ == kMaxWaiting) {
        end(settle, SettleOutcome::kDropped);
        return;
    }

    settle->next = nullptr;

    if (waiting_last_ != nullptr) {
        waiting_last_->next = settle;
    } else {
        waiting_ = settle;
    }

    waiting_last_ = settle;
    waiting_count_++;
}

Settle *SettleQueue::take_waiting() noexcept
{
    Settle *list = waiting_;

    waiting_ = nullptr;
    waiting_last_ = nullptr;
    waiting_count_ = 0;
    return list;
}

void SettleQueue::take_reply(Settle *settle,
                             const Reply *reply) noexcept
{
    std::int64_t applied = 0;
    ScriptReply decoded = decode_settle_reply(reply, &applied);

    if (decoded.kind != ScriptReply::Kind::kVerdict) {
        end(settle, SettleOutcome::kFailed);
        return;
    }

    auto magnitude = static_cast<std::uint64_t>(applied < 0 ? -applied
                                                             : applied);
    metrics::record_units(settle->zone->index,
                          applied < 0 ? UnitEvent::kSettleReturned
                                      : UnitEvent::kSettleAdded,
                          magnitude);
    end(settle, SettleOutcome::kApplied);
}

void SettleQueue::end(Settle *settle, SettleOutcome outcome) noexcept
{
    static const char *const kLost[] = {
        nullptr, "never sent to redis, dropped",
        "sent to redis and not answered, not sent again",
        "refused by redis",
    };
    static_assert(std::size(kLost)
                  == static_cast<std::size_t>(SettleOutcome::kCount));
    const char *lost = kLost[static_cast<std::size_t>(outcome)];

    metrics::record_settle(settle->zone->index, outcome);

    if (lost != nullptr && log_.allow()) {
        ngx_log_error(NGX_LOG_WARN, drain_.log, 0,
                      "ratelimit: a settle of %L units in zone \"%V\" was "
                      "%s", settle->units, &settle->zone->name, lost);
    }

    delete settle;
    let_go();
}

void SettleQueue::drop(Settle *list) noexcept
{
    while (list != nullptr) {
        Settle *settle = list;
        list = list->next;
        end(settle, SettleOutcome::kDropped);
    }
}

// While settles are held: one that waits for a link that believes itself
// up is sent; a worker that exits sends what it holds at once and waits
// one more timeout for the answers, then drops what still waits.
void SettleQueue::on_drain(ngx_event_t *ev) noexcept
{
    auto *queue = static_cast<SettleQueue *>(ev->data);
    bool exiting = ngx_exiting || ngx_quit || ngx_terminate;

    if (queue->held_ == 0) {
        return;
    }

    if (exiting && queue->draining_) {
        queue->drop(queue->take_waiting());
        return;
    }

    queue->draining_ = exiting;
    queue->sender_.send(queue->sender_.data, exiting);

    if (queue->held_ > 0) {
        ngx_add_timer(ev, queue->timeout_);
    }
}

}  // namespace ratelimit
