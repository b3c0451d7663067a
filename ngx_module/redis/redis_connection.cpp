#include "redis/redis_connection.hpp"

#include <cstring>
#include <new>

#include <hiredis/hiredis.h>

namespace ratelimit {

namespace {

RedisConnection *connection_of(ngx_event_t *ev)
{
    return static_cast<RedisConnection *>(
        static_cast<ngx_connection_t *>(ev->data)->data);
}

}  // namespace

ngx_msec_t reconnect_delay(ngx_uint_t failures) noexcept
{
    constexpr ngx_msec_t kFirst = 50;
    constexpr ngx_msec_t kMax = 500;

    return failures < 4 ? kFirst << failures : kMax;
}

bool make_sockaddr(std::string_view host, int port, ngx_sockaddr_t *sa,
                   socklen_t *len) noexcept
{
    char text[NGX_SOCKADDR_STRLEN];

    if (host.size() >= sizeof(text) || port < 1 || port > 65535) {
        return false;
    }

    ngx_memcpy(text, host.data(), host.size());
    text[host.size()] = '\0';
    ngx_memzero(sa, sizeof(ngx_sockaddr_t));

    if (inet_pton(AF_INET, text, &sa->sockaddr_in.sin_addr) == 1) {
        sa->sockaddr_in.sin_family = AF_INET;
        *len = sizeof(sockaddr_in);
#if (NGX_HAVE_INET6)
    } else if (inet_pton(AF_INET6, text, &sa->sockaddr_in6.sin6_addr) == 1) {
        sa->sockaddr_in6.sin6_family = AF_INET6;
        *len = sizeof(sockaddr_in6);
#endif
    } else {
        return false;
    }

    ngx_inet_set_port(&sa->sockaddr, static_cast<in_port_t>(port));
    return true;
}

RedisConnection::RedisConnection(Owner *owner, LogThrottle *throttle,
                                 ngx_log_t *log) noexcept
    : owner_(owner), throttle_(throttle), log_(log)
{
    quiet_log_ = *log;
    quiet_log_.log_level = NGX_LOG_INFO;
    quiet_log_.writer = capture;
    quiet_log_.wdata = this;
    quiet_log_.handler = nullptr;
    quiet_log_.data = nullptr;
    quiet_log_.action = nullptr;
    quiet_log_.connection = 0;
    quiet_log_.next = nullptr;

    init_event(&timer_, on_timer, this, log);
}

RedisConnection::~RedisConnection()
{
    close();
    ::operator delete[](ring_, std::nothrow);
#if (NGX_SSL)
    if (session_ != nullptr) {
        ngx_ssl_free_session(session_);
    }
#endif
}

bool RedisConnection::open(const Peer &peer) noexcept
{
    close();
    peer_ = peer;
    last_error_len_ = 0;
    reader_ = replies_.create_reader();

    if (reader_ == nullptr) {
        return false;
    }

    ngx_peer_connection_t pc;
    ngx_memzero(&pc, sizeof(ngx_peer_connection_t));
    pc.sockaddr = const_cast<sockaddr *>(peer.address);
    pc.socklen = peer.socklen;
    pc.name = &peer_.display;
    pc.get = ngx_event_get_peer;
    pc.log = &quiet_log_;
    pc.log_error = NGX_ERROR_ERR;

    ngx_int_t rc = ngx_event_connect_peer(&pc);
    ngx_err_t err = ngx_socket_errno;

    if (rc != NGX_OK && rc != NGX_AGAIN) {
        redisReaderFree(reader_);
        reader_ = nullptr;

        if (throttle_->allow()) {
            ngx_log_error(NGX_LOG_WARN, log_, 0,
                          "ratelimit: cannot connect to redis at \"%V\": %s",
                          &peer_.display,
                          rc == NGX_DECLINED ? strerror(err) : captured());
        }
        return false;
    }

    c_ = pc.connection;
    c_->data = this;
    c_->pool = ngx_create_pool(1024, &quiet_log_);

    if (c_->pool == nullptr) {
        drop();
        return false;
    }

    c_->read->handler = on_connect_event;
    c_->write->handler = on_connect_event;
    state_ = State::kConnecting;
    ngx_add_timer(&timer_, peer.connect_timeout);

    // Queued now, written first once connected: whatever is sent before
    // then goes after them.
    ngx_uint_t epoch = epoch_;
    authenticate();

    if (epoch == epoch_ && rc == NGX_OK) {
        on_connected();
    }

    return true;
}

void RedisConnection::close() noexcept
{
    if (state_ != State::kIdle) {
        drop();
    }
}

void RedisConnection::settle() noexcept
{
    stop_timer(&timer_);
}

// A connect in progress ends with the socket writable, or readable with an
// error: SO_ERROR says which.
void RedisConnection::on_connect_event(ngx_event_t *ev) noexcept
{
    RedisConnection *conn = connection_of(ev);
    int err = 0;
    socklen_t len = sizeof(int);

    if (getsockopt(conn->c_->fd, SOL_SOCKET, SO_ERROR,
                   reinterpret_cast<char *>(&err), &len) == -1)
    {
        err = ngx_socket_errno;
    }

    if (err != 0) {
        conn->fail("cannot connect to", strerror(err));
        return;
    }

    conn->on_connected();
}

void RedisConnection::on_connected() noexcept
{
    if (peer_.address->sa_family != AF_UNIX) {
        ngx_tcp_nodelay(c_);
    }

    if (peer_.tls != nullptr && peer_.tls->enable) {
        state_ = State::kHandshaking;
        start_tls();
        return;
    }

    start_io();
}

// Connected, TLS done: what was queued meanwhile goes out, then the owner
// is told.
void RedisConnection::start_io() noexcept
{
    ngx_uint_t epoch = epoch_;

    state_ = State::kOpen;
    c_->read->handler = on_read_event;
    c_->write->handler = on_write_event;
    flush();

    if (epoch == epoch_) {
        owner_->on_open(this);
    }
}

bool RedisConnection::send(std::string_view command, ReplyHandler handler,
                           void *data) noexcept
{
    if (state_ == State::kIdle || !push(handler, data)) {
        return false;
    }

    try {
        out_.append(command);
    } catch (...) {
        count_--;  // the waiter just pushed, at the tail
        return false;
    }

    // Written by a posted event, once this loop turn's commands are all
    // queued: one write takes them, and Redis reads them in one read and
    // answers them in one write (a cluster node gets a call per slot).
    if (state_ == State::kOpen && !c_->write->posted) {
        ngx_post_event(c_->write, &ngx_posted_events);
    }

    return true;
}

bool RedisConnection::send_argv(int argc, const char **argv,
                                const size_t *lens, ReplyHandler handler,
                                void *data) noexcept
{
    char *command = nullptr;
    int len = redisFormatCommandArgv(&command, argc, argv, lens);

    if (len < 0) {
        return false;
    }

    bool sent = send({command, static_cast<size_t>(len)}, handler, data);
    redisFreeCommand(command);
    return sent;
}

void RedisConnection::check_stall(ngx_msec_t stall_ms) noexcept
{
    if (state_ != State::kOpen || count_ == 0
        || ngx_current_msec - progress_msec_ < stall_ms)
    {
        return;
    }

    if (throttle_->allow()) {
        ngx_log_error(NGX_LOG_WARN, log_, 0,
                      "ratelimit: redis at \"%V\" has answered nothing for "
                      "%M ms with %ui calls waiting, reconnecting",
                      &peer_.display, ngx_current_msec - progress_msec_,
                      count_);
    }

    fail(nullptr, nullptr);
}

// Logs "ratelimit: EVENT redis at "ADDR": CAUSE" (unless event is nullptr:
// already said), closes, and tells the owner.  CAUSE may hold the peer's
// bytes (hiredis quotes a bad reply; OpenSSL, a certificate's names).
void RedisConnection::fail(const char *event, const char *cause) noexcept
{
    if (event != nullptr && throttle_->allow()) {
        LoggedText text(cause);
        ngx_log_error(NGX_LOG_WARN, log_, 0,
                      "ratelimit: %s redis at \"%V\": %V", event,
                      &peer_.display, text.str());
    }

    drop();
    owner_->on_close(this);
}

void RedisConnection::drop() noexcept
{
    epoch_++;
    settle();

    if (c_ != nullptr) {
        ngx_pool_t *pool = c_->pool;

#if (NGX_SSL)
        if (c_->ssl != nullptr) {
            // Dropped, not closed politely: nothing waits for the peer.
            c_->ssl->no_wait_shutdown = 1;
            c_->ssl->no_send_shutdown = 1;
            ngx_ssl_shutdown(c_);
        }
#endif

        ngx_close_connection(c_);
        c_ = nullptr;

        if (pool != nullptr) {
            ngx_destroy_pool(pool);
        }
    }

    if (reader_ != nullptr) {
        redisReaderFree(reader_);
        reader_ = nullptr;
    }

    out_.clear();
    out_sent_ = 0;
    state_ = State::kIdle;

    // Only those waiting now: a handler may open the connection again.
    for (ngx_uint_t n = count_; n > 0; n--) {
        Waiter w = pop();
        w.handler(w.data, nullptr);
    }
}

void RedisConnection::flush() noexcept
{
    while (state_ == State::kOpen && out_sent_ < out_.size()) {
        ssize_t n = c_->send(c_,
                             reinterpret_cast<u_char *>(out_.data())
                                 + out_sent_,
                             out_.size() - out_sent_);

        if (n == NGX_AGAIN) {
            if (ngx_handle_write_event(c_->write, 0) != NGX_OK) {
                fail("lost connection to", "cannot watch the socket");
            }
            return;
        }

        if (n <= 0) {
            fail_writing();
            return;
        }

        out_sent_ += static_cast<size_t>(n);
    }

    out_.clear();
    out_sent_ = 0;
}

// A peer that closes often says why first (a TLS alert such as "certificate
// required", an error reply): what is left to read names the cause better
// than the failed write.
void RedisConnection::fail_writing() noexcept
{
    u_char cause[sizeof(last_error_)];
    size_t len = ngx_cpystrn(cause,
                             reinterpret_cast<u_char *>(
                                 const_cast<char *>(captured())),
                             sizeof(cause))
                 - cause;
    ngx_uint_t epoch = epoch_;

    read();

    if (epoch == epoch_) {
        cause[len] = '\0';
        fail("lost connection to", reinterpret_cast<char *>(cause));
    }
}

// Edge-triggered: nothing tells us again about bytes left in the socket or
// in TLS's buffers, so read until it would block.  An end of stream read
// after the last bytes (an error reply, then close) is seen in this event.
void RedisConnection::read() noexcept
{
    ngx_uint_t epoch = epoch_;
    u_char buf[16384];

    while (epoch == epoch_) {
        ssize_t n = c_->recv(c_, buf, sizeof(buf));

        if (n == NGX_AGAIN) {
            if (ngx_handle_read_event(c_->read, 0) != NGX_OK) {
                fail("lost connection to", "cannot watch the socket");
            }
            return;
        }

        if (n == 0) {
            fail("lost connection to", "closed by the server");
            return;
        }

        if (n < 0) {
            fail("lost connection to", captured());
            return;
        }

        if (redisReaderFeed(reader_, reinterpret_cast<char *>(buf),
                            static_cast<size_t>(n)) != REDIS_OK)
        {
            fail("lost connection to", "no memory for a reply");
            return;
        }

        dispatch();
    }
}

// Hands out every complete reply.  A handler may close the connection (or
// a failure may): the epoch says so, and nothing of it is touched again.
void RedisConnection::dispatch() noexcept
{
    ngx_uint_t epoch = epoch_;

    while (epoch == epoch_) {
        void *reply = nullptr;

        if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
            char why[160];
            *ngx_snprintf(reinterpret_cast<u_char *>(why), sizeof(why) - 1,
                          "bad reply: %s", reader_->errstr) = '\0';
            fail("lost connection to", why);
            return;
        }

        if (reply == nullptr) {
            return;
        }

        Waiter w = push_;

        if (!pushed(static_cast<const Reply *>(reply))) {
            if (count_ == 0) {
                replies_.reset();
                fail("lost connection to", "a reply nobody asked for");
                return;
            }

            w = pop();
        }

        progress_msec_ = ngx_current_msec;
        w.handler(w.data, static_cast<const Reply *>(reply));
        replies_.reset();
    }
}

bool RedisConnection::pushed(const Reply *reply) const noexcept
{
    return push_.handler != nullptr && reply->type == Reply::Type::kArray
           && reply->elements == 3
           && reply->element[0].type == Reply::Type::kString
           && reply->element[0].text == "message";
}

bool RedisConnection::push(ReplyHandler handler, void *data) noexcept
{
    if (count_ == capacity_) {
        ngx_uint_t capacity = capacity_ == 0 ? 16 : capacity_ * 2;
        auto *ring = static_cast<Waiter *>(::operator new[](
            capacity * sizeof(Waiter), std::nothrow));

        if (ring == nullptr) {
            return false;
        }

        for (ngx_uint_t i = 0; i < count_; i++) {
            ring[i] = ring_[(head_ + i) % capacity_];
        }

        ::operator delete[](ring_, std::nothrow);
        ring_ = ring;
        capacity_ = capacity;
        head_ = 0;
    }

    if (count_ == 0) {
        progress_msec_ = ngx_current_msec;
    }

    ring_[(head_ + count_) % capacity_] = {handler, data};
    count_++;
    return true;
}

RedisConnection::Waiter RedisConnection::pop() noexcept
{
    Waiter w = ring_[head_];
    head_ = (head_ + 1) % capacity_;
    count_--;
    return w;
}

void RedisConnection::on_read_event(ngx_event_t *ev) noexcept
{
    RedisConnection *conn = connection_of(ev);

    if (conn->state_ == State::kOpen) {
        conn->read();
    }
}

void RedisConnection::on_write_event(ngx_event_t *ev) noexcept
{
    RedisConnection *conn = connection_of(ev);

    if (conn->state_ == State::kOpen) {
        conn->flush();
    }
}

void RedisConnection::on_timer(ngx_event_t *ev) noexcept
{
    auto *conn = static_cast<RedisConnection *>(ev->data);
    char why[64];

    *ngx_snprintf(reinterpret_cast<u_char *>(why), sizeof(why) - 1,
                  "timed out after %M ms", conn->peer_.connect_timeout)
        = '\0';
    conn->fail("cannot connect to", why);
}

// The writer of quiet_log_: keeps nginx's last message about the
// connection, without the time and pid in front.
void RedisConnection::capture(ngx_log_t *log, ngx_uint_t level, u_char *buf,
                              size_t len) noexcept
{
    auto *conn = static_cast<RedisConnection *>(log->wdata);
    u_char *end = buf + len;
    u_char *text = ngx_strlchr(buf, end, ']');

    if (text != nullptr) {
        text = ngx_strlchr(text, end, ':');
    }

    text = (text != nullptr && text + 2 <= end) ? text + 2 : buf;

    while (end > text && (end[-1] == '\n' || end[-1] == '\r')) {
        end--;
    }

    conn->last_error_len_ = ngx_min(static_cast<size_t>(end - text),
                                    sizeof(conn->last_error_) - 1);
    ngx_memcpy(conn->last_error_, text, conn->last_error_len_);
}

// nginx's last word on the connection, as a C string.
const char *RedisConnection::captured() noexcept
{
    if (last_error_len_ == 0) {
        return "closed";
    }

    last_error_[last_error_len_] = '\0';
    return reinterpret_cast<const char *>(last_error_);
}

}  // namespace ratelimit
