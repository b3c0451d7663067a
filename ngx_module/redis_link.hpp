// A worker's connection to Redis: one hiredis async context driven by the
// nginx event loop, reconnected with backoff, carrying the worker's batches
// of script calls pipelined.
#pragma once

#include "ratelimit_conf.hpp"

#include <hiredis/async.h>

namespace ratelimit {

struct Batch;

class RedisLink {
public:
    RedisLink(const RedisTarget &target, ngx_log_t *log) noexcept;

    RedisLink(const RedisLink &) = delete;
    RedisLink &operator=(const RedisLink &) = delete;

    void start() noexcept;

    // Closes the connection for good: pending calls get their NULL reply.
    void shutdown() noexcept;

    // Connected, and the handshake sent: commands may be sent.
    bool up() const noexcept { return state_ == State::kUp; }

    enum class SendResult { kSent, kDown };

    // Sends a batch's command, a complete RESP command that hiredis copies;
    // its reply goes to batch->owner.  Unless kSent, nothing was sent.
    // Written at once, unless called from inside hiredis (a reply callback
    // resending after NOSCRIPT): then the posted write event writes it.
    SendResult send(Batch *batch, std::string_view command) noexcept;

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
    bool closing_ = false;    // shutdown() called: no reconnect
    ngx_uint_t failures_ = 0; // consecutive, for the backoff
    ngx_uint_t in_flight_ = 0;      // commands sent, not yet answered
    ngx_msec_t progress_msec_ = 0;  // last reply, or first call after none
    time_t last_log_ = 0;
    ngx_event_t connect_timer_;
    ngx_event_t reconnect_timer_;
};

}  // namespace ratelimit
