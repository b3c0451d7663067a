#include "redis/redis_subscriber.hpp"

namespace ratelimit {

RedisSubscriber::RedisSubscriber(RedisLink *link, std::string_view channel,
                                 MessageHandler on_message,
                                 ChangeHandler on_change, void *data,
                                 ngx_log_t *log) noexcept
    : link_(link), channel_(channel), on_message_(on_message),
      on_change_(on_change), data_(data), log_(log),
      conn_(this, link->log_throttle(), log)
{
    init_event(&retry_, on_retry, this, log);
    conn_.on_push(on_push, this);
    link->on_up(on_link_up, this);

    // A cluster's link never comes up as one connection: its first try
    // (which waits for the slot map) is the retry's.  With one server the
    // link's coming up opens it.
    ngx_add_timer(&retry_, kRetryMs);
}

RedisSubscriber::~RedisSubscriber()
{
    shutdown();
}

void RedisSubscriber::shutdown() noexcept
{
    closing_ = true;
    subscribed_ = false;

    stop_timer(&retry_);

    conn_.close();
}

// Each time the link comes up it may be on another server (a failover):
// the subscription follows it there.
void RedisSubscriber::on_link_up(void *data) noexcept
{
    auto *sub = static_cast<RedisSubscriber *>(data);

    if (sub->closing_) {
        return;
    }

    sub->conn_.close();
    sub->subscribed_ = false;

    if (!sub->take_peer(sub->link_->peer())) {
        sub->lost();
        return;
    }

    sub->open();
}

// False if no memory for the host, which TLS checks the server against.
bool RedisSubscriber::take_peer(const RedisConnection::Peer &peer) noexcept
{
    size_t len = ngx_min(peer.display.len, sizeof(display_));

    try {
        host_.assign(reinterpret_cast<const char *>(peer.host.data),
                     peer.host.len);
    } catch (...) {
        return false;
    }

    ngx_memcpy(&addr_, peer.address, peer.socklen);
    ngx_memcpy(display_, peer.display.data, len);
    peer_ = peer;
    peer_.address = &addr_.sockaddr;
    peer_.display = {len, display_};
    peer_.host = {host_.size(), reinterpret_cast<u_char *>(host_.data())};
    return true;
}

// In a cluster, any master serves: each try takes the next one the map
// names, so a node that died is left behind.
void RedisSubscriber::open_in_cluster() noexcept
{
    RedisConnection::Peer peer;

    if (!link_->cluster_peer(next_master_++, &peer)) {
        ngx_add_timer(&retry_, kRetryMs);
        return;
    }

    if (!take_peer(peer)) {
        ngx_add_timer(&retry_, kRetryMs);
        return;
    }

    open();
}

void RedisSubscriber::open() noexcept
{
    stop_timer(&retry_);

    if (!conn_.open(peer_)) {
        lost();
    }
}

void RedisSubscriber::on_open(RedisConnection *conn) noexcept
{
    const char *argv[2] = {"SUBSCRIBE", channel_.data()};
    size_t lens[2] = {9, channel_.size()};

    if (!conn->send_argv(2, argv, lens, on_subscribe_reply, this)) {
        conn->close();
        lost();
    }
}

void RedisSubscriber::on_subscribe_reply(void *data,
                                         const Reply *reply) noexcept
{
    auto *sub = static_cast<RedisSubscriber *>(data);

    // nullptr: the connection is gone, and on_close() follows, or it was
    // closed on purpose.
    if (reply == nullptr) {
        return;
    }

    if (reply->type != Reply::Type::kArray) {
        if (sub->link_->may_log()) {
            LoggedText error(reply->type == Reply::Type::kError
                             ? reply->text
                             : std::string_view());
            ngx_log_error(NGX_LOG_ERR, sub->log_, 0,
                          "ratelimit: redis at \"%V\" refused SUBSCRIBE: %V",
                          &sub->peer_.display, error.str());
        }
        sub->conn_.close();
        sub->lost();
        return;
    }

    sub->conn_.settle();
    sub->subscribed_ = true;
    sub->on_change_(sub->data_);
}

void RedisSubscriber::on_push(void *data, const Reply *reply) noexcept
{
    auto *sub = static_cast<RedisSubscriber *>(data);
    const Reply &message = reply->element[2];

    if (message.type == Reply::Type::kString) {
        sub->on_message_(sub->data_, message.text);
    }
}

void RedisSubscriber::on_close(RedisConnection *) noexcept
{
    lost();
}

// Tried again while the link is up; when it is down, its coming up opens
// the subscription again.
void RedisSubscriber::lost() noexcept
{
    bool was = subscribed_;

    subscribed_ = false;

    if (!closing_ && !retry_.timer_set) {
        ngx_add_timer(&retry_, kRetryMs);
    }

    if (was) {
        on_change_(data_);
    }
}

void RedisSubscriber::on_retry(ngx_event_t *ev) noexcept
{
    auto *sub = static_cast<RedisSubscriber *>(ev->data);

    if (sub->closing_ || !sub->conn_.idle()) {
        return;
    }

    if (sub->link_->clustered()) {
        sub->open_in_cluster();
        return;
    }

    if (!sub->link_->up()) {
        return;
    }

    if (!sub->take_peer(sub->link_->peer())) {
        sub->lost();
        return;
    }

    sub->open();
}

}  // namespace ratelimit
