// A worker's connection to Redis: one hiredis async context driven by the
// nginx event loop, reconnected with backoff, carrying every request's
// script call pipelined.
#pragma once

#include <hiredis/async.h>

#include "ratelimit_conf.hpp"

namespace ratelimit {

struct RequestState;

// A call in flight.  hiredis cannot cancel a callback and runs every pending
// one, with a NULL reply if the connection fails, so the record handed to it
// cannot live in the request's pool: the link owns it, and a request that
// stops waiting (timeout, client gone) just clears `state`.
struct Pending {
    RequestState *state;
    Pending *next_free;
};

class RedisLink {
public:
    RedisLink(const RedisTarget &target, ngx_log_t *log) noexcept;
    ~RedisLink();

    RedisLink(const RedisLink &) = delete;
    RedisLink &operator=(const RedisLink &) = delete;

    void start() noexcept;

    // Closes the connection for good: pending calls get their NULL reply.
    void shutdown() noexcept;

    enum class SendResult { kSent, kDown, kSaturated };

    // Sends a command for a waiting request.  Unless kSent, nothing was
    // sent: the link is down (or hiredis refused), or kMaxInFlight calls
    // already wait for Redis.
    SendResult send(RequestState *state, int argc, const char **argv,
                    const size_t *argvlen) noexcept;

    // Calls a worker keeps in flight at most.  A stalled Redis leaves every
    // call queued (its callback, its bytes, its Pending) even after its
    // request timed out; this bounds that memory (about 200 bytes a call)
    // and makes requests past it fail at once instead of waiting.
    static constexpr ngx_uint_t kMaxInFlight = 65536;

    // At most once a second, so a Redis outage under load is one log line a
    // second per worker, not one per request.
    bool may_log() noexcept;

    // A request gave up waiting.  If Redis has answered nothing for
    // kStallMs while calls wait, the connection is taken for wedged (a
    // half-open TCP connection after a partition, a reply that never ends)
    // and is replaced: its calls fail at once and a new one is opened.
    void on_request_timeout() noexcept;

    static constexpr ngx_msec_t kStallMs = 2000;

    const RedisTarget &target() const { return target_; }

private:
    enum class State { kDown, kConnecting, kUp };

    void connect() noexcept;
    bool attach() noexcept;
    void handshake() noexcept;
    void schedule_reconnect() noexcept;
    void release_connection() noexcept;
    void flush() noexcept;
    Pending *acquire() noexcept;
    void release(Pending *p) noexcept;
    void watch(ngx_event_t *ev, ngx_uint_t event) noexcept;
    void unwatch(ngx_event_t *ev, ngx_uint_t event) noexcept;

    static void on_connect(const redisAsyncContext *ac, int status) noexcept;
    static void on_disconnect(const redisAsyncContext *ac,
                              int status) noexcept;
    static void on_reply(redisAsyncContext *ac, void *reply,
                         void *privdata) noexcept;
    static void on_handshake_reply(redisAsyncContext *ac, void *reply,
                                   void *privdata) noexcept;
    static void on_read(ngx_event_t *ev) noexcept;
    static void on_write(ngx_event_t *ev) noexcept;
    static void on_connect_timeout(ngx_event_t *ev) noexcept;
    static void on_reconnect(ngx_event_t *ev) noexcept;

    static void add_read(void *data) noexcept;
    static void del_read(void *data) noexcept;
    static void add_write(void *data) noexcept;
    static void del_write(void *data) noexcept;
    static void cleanup(void *data) noexcept;

    const RedisTarget &target_;
    ngx_log_t *log_;
    State state_ = State::kDown;
    redisAsyncContext *ac_ = nullptr;
    ngx_connection_t *conn_ = nullptr;
    bool writing_ = false;    // inside redisAsyncHandleWrite
    ngx_uint_t unsent_ = 0;   // calls queued since the last write
    bool closing_ = false;    // shutdown() called: no reconnect
    ngx_uint_t failures_ = 0; // consecutive, for the backoff
    ngx_uint_t in_flight_ = 0;
    ngx_msec_t progress_msec_ = 0;  // last reply, or first call after none
    time_t last_log_ = 0;
    ngx_event_t connect_timer_;
    ngx_event_t reconnect_timer_;
    Pending *free_ = nullptr;
};

}  // namespace ratelimit
