// A worker's side of forgiving a subject (`ratelimit_query ... delete=on`)
// and of changing its override (override=on): it sends the call that
// deletes a subject's key, or writes its side key, and publishes its
// forgiving (scripts/forgive_call.hpp, override_call.hpp), and listens on
// the fleet's forgive
// channel, each worker on its own Pub/Sub connection, to drop the
// rejection it remembers of a forgiven key (its DenyCache), and the
// override its server's memories were told of it.  Pub/Sub loses
// what is published while it is not subscribed: each time it subscribes
// again, or loses its subscription, the worker forgets every rejection it
// remembers, which costs a call to Redis each, never a wrong answer; and
// each time it subscribes again, the overrides fail local keeps.
#pragma once

#include <string>

#include "limits/override.hpp"
#include "redis/redis_subscriber.hpp"

namespace ratelimit {

class DenyCache;

// Told each key a forgiving names, with `data`; `forgiven` nullptr: none.
struct ForgivenHook {
    void (*forgiven)(void *data, std::string_view key) noexcept;
    void *data;
};

class ForgiveListener {
public:
    // `wake_key` signs the messages it sends and checks those it receives
    // (empty: none are signed, and any is taken); `denied` outlives it.
    // `local` (nullptr: none), the memory fail local counts in, forgets
    // the overrides of forgiven keys too (local/local_memory.hpp), and so
    // do the quota leases, through `leases` (leases/lease_decision.hpp).
    ForgiveListener(RedisLink *link, const ngx_str_t &prefix,
                    const ngx_str_t &wake_key, DenyCache *denied,
                    ngx_shm_zone_t *local, ForgivenHook leases,
                    ngx_log_t *log) noexcept;
    ~ForgiveListener();

    ForgiveListener(const ForgiveListener &) = delete;
    ForgiveListener &operator=(const ForgiveListener &) = delete;

    // Subscribes to the forgive channel; false on no memory.
    bool subscribe() noexcept;

    // Sends the call that forgives `key`; its one reply goes to `answered`
    // (nullptr: none will come).  With `side` and `marker` (of a zone with
    // ban=: the subject's side key and the zone's marker in its slot) it
    // lifts the subject's ban too.  False if it could not be sent: the
    // link is down, or no memory.
    bool forgive(std::string_view key, std::string_view side,
                 std::string_view marker,
                 RedisConnection::ReplyHandler answered, void *data) noexcept;

    // Sends the call that makes `change` to the override in side key
    // `side` (whose zone's marker in its slot is `marker`) of count key
    // `key`, whose remembered rejections it forgives, as forgive() does.
    bool set_override(std::string_view key, std::string_view side,
                      std::string_view marker, const OverrideChange &change,
                      RedisConnection::ReplyHandler answered,
                      void *data) noexcept;

private:
    bool send(std::string_view key, const std::string &command,
              RedisConnection::ReplyHandler answered, void *data) noexcept;
    static void on_message(void *data, std::string_view message) noexcept;
    static void on_change(void *data) noexcept;

    RedisLink *link_;
    DenyCache *denied_;
    ngx_shm_zone_t *local_;
    ForgivenHook leases_;
    ngx_log_t *log_;
    std::string channel_;     // "PREFIX:wake:forgive"
    std::string wake_key_;    // may be empty
    RedisSubscriber *subscriber_ = nullptr;
};

}  // namespace ratelimit
