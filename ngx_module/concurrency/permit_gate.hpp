// A worker's side of the concurrency zones: the calls of the concurrency
// script it sends (each answered to the request that waits for it, if it
// still does), the requests of the worker waiting in a queue, found again
// by their token, and the Pub/Sub subscription that tells it which of them
// Redis gave a permit to.
#pragma once

#include <string>

#include "scripts/concurrency_script.hpp"
#include "redis/redis_subscriber.hpp"

namespace ratelimit {

class PermitGate;

// Takes the answer to a call (nullptr: none will come) for `waiter`.
using PermitAnswer = void (*)(void *waiter, const PermitReply *reply) noexcept;

// One call of the script in flight.  Redis answers every call, or the
// connection hands it nullptr, so the record outlives a request that
// stopped waiting: the request clears `waiter`.
struct PermitCallRecord {
    PermitGate *gate;
    PermitAnswer answered;
    void *waiter;       // waits for the answer; nullptr: nobody does
    PermitOp op;
    bool retried;       // sent again with EVAL after NOSCRIPT
    const ConcurrencyPolicy *policy;
    bool dry_run;
    std::string key;    // the subject's key
    std::uint64_t seq;
    std::uint64_t freed_us;  // a release: when it was sent, wall_clock_us()
};

// A request that asked for a permit and may be queued, as the gate knows
// it: found by its number when a wake-up names it, or told to check its
// place again.  It lives inside its holder's record, which the gate never
// sees.
struct PermitWaiter {
    ngx_rbtree_node_t node;  // in the gate's waiters, by seq, from the ask
                             // to the outcome
    bool waiting;            // in it now
    // A wake-up names it: Redis gave it the permit, freed at `freed_us`
    // (wall_clock_us(); 0 if not said), if the message is `signed` with
    // the fleet's wake key.  Anyone who may PUBLISH can send an unsigned
    // one: that is a hint, which the waiter confirms with Redis.
    void (*woken)(PermitWaiter *waiter, std::uint64_t freed_us,
                  bool is_signed) noexcept;
    // Messages may have been lost: it asks Redis for its place.
    void (*recheck)(PermitWaiter *waiter) noexcept;
};

// Microseconds since the epoch, read now: the hand-off of a permit is timed
// between two workers, maybe of two servers, so by the wall clock.
std::uint64_t wall_clock_us() noexcept;

class PermitGate {
public:
    // `wake_key`: signs the wake-ups of the calls it sends and checks those
    // it receives; empty: none are signed.
    PermitGate(RedisLink *link, const ngx_str_t &prefix,
               const ngx_str_t &wake_key, ngx_log_t *log) noexcept;
    ~PermitGate();

    PermitGate(const PermitGate &) = delete;
    PermitGate &operator=(const PermitGate &) = delete;

    // Names the worker and subscribes to its channel; false on no memory.
    bool subscribe() noexcept;

    // Sends a call for request `seq` of the worker.  Its answer goes to
    // `answered(waiter)`, or nowhere if `waiter` is nullptr.  nullptr if
    // it could not be sent: the link is down, or no memory.
    PermitCallRecord *send(PermitOp op, PermitAnswer answered, void *waiter,
                           std::string_view key, std::uint64_t seq,
                           const ConcurrencyPolicy *policy,
                           bool dry_run) noexcept;

    std::uint64_t next_seq() noexcept { return ++seq_; }

    // A request asking for a permit, or queued for one, as request `seq`
    // of the worker, found by its token when Redis grants it a permit:
    // from its ask on, since the wake-up may come before the ask's answer.
    void add_waiter(PermitWaiter *waiter, std::uint64_t seq) noexcept;
    void remove_waiter(PermitWaiter *waiter) noexcept;

    RedisLink *link() const noexcept { return link_; }
    ngx_log_t *log() const noexcept { return log_; }

    // Length of a worker's name in tokens: 16 hex digits.
    static constexpr size_t kWorkerIdLength = 16;

private:
    void answer(PermitCallRecord *call, const Reply *reply) noexcept;
    bool format(const PermitCallRecord *call, bool eval, std::string *command,
                std::string *held) const noexcept;
    const char *put(PermitCallRecord *call, bool eval) noexcept;
    static void on_answer(void *data, const Reply *reply) noexcept;
    static void on_message(void *data, std::string_view message) noexcept;
    PermitWaiter *find_waiter(std::uint64_t seq) noexcept;
    bool signed_by_fleet(std::string_view signed_part,
                         std::string_view signature) const noexcept;
    static void on_subscription(void *data) noexcept;

    RedisLink *link_;
    ngx_log_t *log_;
    std::string wake_prefix_;   // "PREFIX:wake:", as the script wants it
    std::string channel_;       // wake_prefix_ and this worker's name
    std::string wake_key_;      // may be empty
    std::uint64_t seq_ = 0;
    RedisSubscriber *subscriber_ = nullptr;
    ngx_rbtree_t waiters_;      // of PermitWaiter, by seq
    ngx_rbtree_node_t sentinel_;
};

}  // namespace ratelimit
