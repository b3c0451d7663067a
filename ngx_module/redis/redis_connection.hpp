// One connection to a Redis server or a sentinel, on nginx's own I/O: a
// non-blocking connect (ngx_event_connect_peer), nginx's TLS, nginx timers.
// hiredis only formats commands and parses replies.  It carries commands out
// and hands each reply to the handler its sender gave, in order; it knows
// nothing of what the commands are for.  The data link, the sentinel
// queries, and later cluster and Pub/Sub connections are all this type.
#pragma once

#include "conf/module_conf.hpp"
#include "redis/reply_arena.hpp"
#include "replies/reply.hpp"

#include <string>

namespace ratelimit {

// An IP address as Redis announces one (a sentinel's master, a cluster
// node) and a port, into `sa`; false if `host` is not an IP address.
bool make_sockaddr(std::string_view host, int port, ngx_sockaddr_t *sa,
                   socklen_t *len) noexcept;

// The wait before connecting again after `failures` failures in a row:
// 50 ms doubling to 500 ms, so a Redis that comes back is found within
// half a second, and one that refuses us (a bad password) sees a few
// attempts a second per worker, not a storm.
ngx_msec_t reconnect_delay(ngx_uint_t failures) noexcept;

class RedisConnection {
public:
    // Gets each command's reply, or nullptr if the connection ended first
    // (the command may or may not have run: never send it again).  The
    // reply, its text and elements are gone when the handler returns.
    using ReplyHandler = void (*)(void *data, const Reply *reply) noexcept;

    class Owner {
    public:
        // Connected (TLS included) and AUTH/SELECT sent: commands may go.
        virtual void on_open(RedisConnection *conn) noexcept = 0;
        // The connection failed or was lost, and is closed; every handler
        // waiting on it has had its nullptr.  Not called for close().
        virtual void on_close(RedisConnection *conn) noexcept = 0;

    protected:
        ~Owner() = default;
    };

    struct Peer {
        const struct sockaddr *address;
        socklen_t socklen;
        ngx_str_t display;                    // for log lines
        // The server's host as configured or announced: a host name or an
        // IP address, NUL-terminated; empty for unix:.  Over TLS its
        // certificate must be for it (an IP address among the certificate's
        // IP names), and a host name is the SNI, unless tls->name is one
        // name for every server.
        ngx_str_t host;
        const RedisCredentials *credentials;
        const RedisTls *tls;                  // nullptr or not enabled: TCP
        ngx_msec_t connect_timeout;
    };

    RedisConnection(Owner *owner, LogThrottle *throttle,
                    ngx_log_t *log) noexcept;
    ~RedisConnection();

    RedisConnection(const RedisConnection &) = delete;
    RedisConnection &operator=(const RedisConnection &) = delete;

    // Starts connecting; the peer's strings must outlive the connection.
    // False if it failed at once: logged, and on_close() is not called.
    bool open(const Peer &peer) noexcept;

    // Closes at once; waiting handlers get nullptr.
    void close() noexcept;

    bool is_open() const noexcept { return state_ == State::kOpen; }
    bool idle() const noexcept { return state_ == State::kIdle; }

    // The owner has seen the connection answer as it should: the connect
    // timer, which bounds everything before, stops.
    void settle() noexcept;

    // Queues a complete RESP command (copied), written with the others of
    // this loop turn by a posted event, or once connected if open() has not
    // finished.  False, with nothing sent, if the connection is idle or no
    // memory.
    bool send(std::string_view command, ReplyHandler handler,
              void *data) noexcept;

    // Formats argv as a command, then as send().
    bool send_argv(int argc, const char **argv, const size_t *lens,
                   ReplyHandler handler, void *data) noexcept;

    // Subscriber mode: a message Redis pushes to a subscribed connection
    // (an array whose first element is "message"), which answers no
    // command, goes to `handler`; every other reply answers its command
    // in order, as usual.  Set before open().
    void on_push(ReplyHandler handler, void *data) noexcept
    {
        push_ = {handler, data};
    }

    // If Redis has answered nothing for stall_ms while commands wait, the
    // connection is taken for wedged (a half-open TCP connection after a
    // partition, a reply that never ends): logged, closed as failed.
    void check_stall(ngx_msec_t stall_ms) noexcept;

    const ngx_str_t &display() const noexcept { return peer_.display; }
    const Peer &peer() const noexcept { return peer_; }

    // Open over TLS, resuming the session of its previous connection.
    bool tls_resumed() const noexcept;

private:
    enum class State { kIdle, kConnecting, kHandshaking, kOpen };

    struct Waiter {
        ReplyHandler handler;
        void *data;
    };

    bool start_tls() noexcept;
    const ngx_str_t &tls_name() const noexcept;
    void on_connected() noexcept;
    void start_io() noexcept;
    void authenticate() noexcept;
    void fail(const char *what, const char *cause) noexcept;
    void drop() noexcept;
    void flush() noexcept;
    void fail_writing() noexcept;
    void read() noexcept;
    void dispatch() noexcept;
    bool push(ReplyHandler handler, void *data) noexcept;
    bool pushed(const Reply *reply) const noexcept;
    Waiter pop() noexcept;
    const char *captured() noexcept;

    static void on_connect_event(ngx_event_t *ev) noexcept;
    static void on_read_event(ngx_event_t *ev) noexcept;
    static void on_write_event(ngx_event_t *ev) noexcept;
    static void on_timer(ngx_event_t *ev) noexcept;
    static void on_auth_reply(void *data, const Reply *reply) noexcept;
    static void capture(ngx_log_t *log, ngx_uint_t level, u_char *buf,
                        size_t len) noexcept;
#if (NGX_SSL)
    static void on_handshake(ngx_connection_t *c) noexcept;
    static void on_new_session(ngx_connection_t *c) noexcept;
#endif

    Owner *owner_;
    LogThrottle *throttle_;
    ngx_log_t *log_;
    // The nginx connection's log: nginx's own messages about it (connect()
    // failed, SSL errors) are kept here, not written, so that a failure is
    // one line of ours naming the cause, at most one a second.
    ngx_log_t quiet_log_;
    u_char last_error_[256];
    size_t last_error_len_ = 0;

    Peer peer_{};
    State state_ = State::kIdle;
    ngx_connection_t *c_ = nullptr;
    ReplyArena replies_;            // where reader_ makes its replies
    redisReader *reader_ = nullptr;
    ngx_uint_t epoch_ = 0;          // bumped by every close
    ngx_event_t timer_;             // connect timeout, until settle()

    std::string out_;               // bytes not yet written
    size_t out_sent_ = 0;

    Waiter *ring_ = nullptr;        // handlers, in the order of commands
    ngx_uint_t capacity_ = 0;
    ngx_uint_t head_ = 0;
    ngx_uint_t count_ = 0;
    Waiter push_{nullptr, nullptr};  // subscriber mode, if set
    ngx_msec_t progress_msec_ = 0;  // last reply, or first send after none

#if (NGX_SSL)
    ngx_ssl_session_t *session_ = nullptr;  // for the next handshake
#endif
};

}  // namespace ratelimit
