// A worker's Pub/Sub connection: a RedisConnection of its own in
// subscriber mode, subscribed to one channel on the server the data link
// is connected to, or on a master of a cluster (where a message published
// on one node reaches every node's subscribers).  It is opened again each
// time the link comes up, and after it is lost while the link stays up.
// Pub/Sub delivers at most once: a message published while it is not
// subscribed is lost, which its owner learns from on_change (subscribed
// again, or lost) to check by other means.
#pragma once

#include <string>

#include "redis/redis_link.hpp"

namespace ratelimit {

class RedisSubscriber final : public RedisConnection::Owner {
public:
    using MessageHandler = void (*)(void *data,
                                    std::string_view message) noexcept;
    // Subscribed, or no longer: messages may have been missed.
    using ChangeHandler = void (*)(void *data) noexcept;

    // `channel` must outlive the subscriber.
    RedisSubscriber(RedisLink *link, std::string_view channel,
                    MessageHandler on_message, ChangeHandler on_change,
                    void *data, ngx_log_t *log) noexcept;
    ~RedisSubscriber();

    RedisSubscriber(const RedisSubscriber &) = delete;
    RedisSubscriber &operator=(const RedisSubscriber &) = delete;

    bool subscribed() const noexcept { return subscribed_; }

    void shutdown() noexcept;

    // After a loss while the link stays up (CLIENT KILL, an output buffer
    // overrun), the next attempt waits this long.
    static constexpr ngx_msec_t kRetryMs = 200;

private:
    void open() noexcept;
    void open_in_cluster() noexcept;
    bool take_peer(const RedisConnection::Peer &peer) noexcept;
    void lost() noexcept;
    void on_open(RedisConnection *conn) noexcept override;
    void on_close(RedisConnection *conn) noexcept override;
    static void on_link_up(void *data) noexcept;
    static void on_subscribe_reply(void *data,
                                   const Reply *reply) noexcept;
    static void on_push(void *data, const Reply *reply) noexcept;
    static void on_retry(ngx_event_t *ev) noexcept;

    RedisLink *link_;
    std::string_view channel_;
    MessageHandler on_message_;
    ChangeHandler on_change_;
    void *data_;
    ngx_log_t *log_;
    RedisConnection conn_;
    bool subscribed_ = false;
    ngx_uint_t next_master_ = 0;  // in a cluster: which one to try next
    bool closing_ = false;
    ngx_event_t retry_;

    // The link's server, copied: the link's own copy changes when it
    // finds another server.
    RedisConnection::Peer peer_{};
    ngx_sockaddr_t addr_;
    u_char display_[NGX_SOCKADDR_STRLEN];
    std::string host_;
};

}  // namespace ratelimit
