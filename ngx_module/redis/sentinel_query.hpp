// Asks the sentinels, in turn, where the master they watch is: SENTINEL
// get-master-addr-by-name, each sentinel bounded by connect_timeout, a null
// or failed answer passing to the next one.
#pragma once

#include "redis/redis_connection.hpp"

namespace ratelimit {

class SentinelQuery final : public RedisConnection::Owner {
public:
    // The master's address, or nullptr when no sentinel could tell; `text`
    // is "IP:PORT" for log lines, `host` the IP address as the sentinel
    // gave it (NUL-terminated).  Both are valid until the next query.
    using Found = void (*)(void *data, const sockaddr *sa, socklen_t len,
                           const ngx_str_t &text,
                           const ngx_str_t &host) noexcept;

    SentinelQuery(const RedisTarget &target, const RedisTls *tls,
                  LogThrottle *throttle, ngx_log_t *log, Found found,
                  void *data) noexcept;

    // Asks, from the sentinel that answered last (on the connection kept
    // open to it); found() is called once, unless cancel() comes first.
    // Nothing if a query is under way.
    void ask_for_master() noexcept;
    void cancel() noexcept;

private:
    void ask() noexcept;
    void answer(const Reply *reply) noexcept;
    void next() noexcept;
    void done(const sockaddr *sa, socklen_t len) noexcept;
    void on_open(RedisConnection *conn) noexcept override;
    void on_close(RedisConnection *conn) noexcept override;
    static void on_reply(void *data, const Reply *reply) noexcept;
    static void on_next(ngx_event_t *ev) noexcept;
    static void on_timeout(ngx_event_t *ev) noexcept;

    const RedisTarget &target_;
    const RedisTls *tls_;
    LogThrottle *throttle_;
    ngx_log_t *log_;
    Found found_;
    void *data_;
    RedisConnection conn_;
    ngx_uint_t current_ = 0;  // the sentinel asked now, or last answering
    ngx_uint_t asked_ = 0;    // sentinels asked in this round
    ngx_event_t next_;        // posted: ask the next sentinel
    ngx_event_t timer_;       // connect_timeout, for each sentinel asked
    bool querying_ = false;

    ngx_sockaddr_t master_;
    socklen_t master_len_ = 0;
    u_char master_text_[NGX_SOCKADDR_STRLEN];
    u_char master_host_[NGX_SOCKADDR_STRLEN];
    size_t master_host_len_ = 0;
};

}  // namespace ratelimit
