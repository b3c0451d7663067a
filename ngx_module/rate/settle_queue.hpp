// The settles a worker's batcher holds (CallBatcher::settle()), and its
// lease renewals' count: the settles that wait for the link, oldest first;
// how many settles and renewals are held, waiting, in batches or in
// flight; the drain that sends them first when the worker exits; and the
// end of each settle, counted in the metrics and logged unless Redis
// answered it.  The batcher owns the queue, and each settle from
// CallBatcher::settle() until SettleQueue::end().
#pragma once

#include <string>

#include "conf/module_conf.hpp"
#include "replies/reply.hpp"
#include "report/metrics_model.hpp"

namespace ratelimit {

// A settle (`ratelimit_settle`, or a part's admission taken back): units
// added to the bucket a request was counted in.
struct Settle {
    std::string key;
    // The policy its call is written with (write_zone_args()), but for a
    // zone whose arguments are its own (Zone::script_args): a calendar
    // zone's periods are made again each time it is sent.
    Policy policy;
    std::int64_t units;     // < 0 gives units back
    std::uint64_t bucket;   // the bucket (of a fixed window: the window)
    const Zone *zone;       // for the metrics and the log
    std::uint16_t slot;     // of the key, in a cluster
    std::uint8_t refusals;  // calls Redis refused whole (see SettleFate)
    Settle *next;           // in the queue of those waiting for the link
};

// A settle of `units` to `bucket` of `key` in `zone`, its call written
// with `policy`; nullptr on no memory, counted as dropped.
Settle *make_settle(std::string_view key, const Policy &policy,
                    std::int64_t units, std::uint64_t bucket,
                    const Zone &zone) noexcept;

class SettleQueue {
public:
    // Who sends what is held, told by the drain: the settles waiting for
    // the link if it is up, and every open batch too when the worker
    // exits (`exiting`).
    struct Sender {
        void (*send)(void *data, bool exiting) noexcept;
        void *data;
    };

    // `timeout`: Redis's (RedisTarget::timeout), which an exiting worker
    // waits for its settles.
    SettleQueue(const Sender &sender, ngx_msec_t timeout,
                ngx_log_t *log) noexcept;
    ~SettleQueue();

    SettleQueue(const SettleQueue &) = delete;
    SettleQueue &operator=(const SettleQueue &) = delete;

    // Settles kept while the link is down, at most: past it, the newest
    // are dropped.
    static constexpr ngx_uint_t kMaxWaiting = 4096;

    // One more settle or renewal held, until let_go() (end() for a
    // settle): the drain runs while any is.
    void hold() noexcept;
    void let_go() noexcept;

    // Keeps a settle until the link is up, if there is room; else it ends
    // dropped.
    void wait(Settle *settle) noexcept;

    // The settles waiting, oldest first, linked by `next`; none wait after.
    Settle *take_waiting() noexcept;

    // The worker exits: whatever is held is sent at once.
    bool draining() const noexcept { return draining_; }

    // The settle's reply, from `reply` on in its batch's: its units counted
    // in the metrics, and the settle ended.
    void take_reply(Settle *settle, const Reply *reply) noexcept;

    // The settle's end: counted in the metrics, logged unless Redis
    // answered it, freed and let go.
    void end(Settle *settle, SettleOutcome outcome) noexcept;

private:
    void drop(Settle *list) noexcept;
    static void on_drain(ngx_event_t *ev) noexcept;

    Sender sender_;
    Settle *waiting_ = nullptr;  // for the link, oldest first
    Settle *waiting_last_ = nullptr;
    ngx_uint_t waiting_count_ = 0;
    ngx_uint_t held_ = 0;        // waiting, in batches or in flight
    // Set while settles are held: unlike the module's other events it is
    // not cancelable, so that a gracefully exiting worker sends them first
    // and waits for their answers, at most two Redis timeouts.
    ngx_event_t drain_;
    bool draining_ = false;      // the worker exits: all sent at once
    LogThrottle log_;            // settles lost
    ngx_msec_t timeout_;         // Redis's (RedisTarget::timeout)
};

}  // namespace ratelimit
