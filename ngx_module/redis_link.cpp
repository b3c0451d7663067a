#include "redis_link.hpp"

#include <cerrno>
#include <new>
#include <sys/socket.h>

#include "call_batch.hpp"
#include "metrics.hpp"
#include "window_script.hpp"

namespace ratelimit {

namespace {

// Reconnect delays: doubling from the first to the cap, so a Redis that comes
// back is found within the cap, and a Redis that refuses us (bad password)
// sees a few attempts a second per worker, not a storm.
constexpr ngx_msec_t kFirstBackoff = 50;
constexpr ngx_msec_t kMaxBackoff = 500;

const char kAuth[] = "AUTH";
const char kSelect[] = "SELECT";
const char kScriptLoad[] = "SCRIPT LOAD";

RedisLink *link_of(const redisAsyncContext *ac)
{
    return static_cast<RedisLink *>(ac->data);
}

RedisLink *link_of(ngx_event_t *ev)
{
    return static_cast<RedisLink *>(
        static_cast<ngx_connection_t *>(ev->data)->data);
}

void init_timer(ngx_event_t *ev, ngx_event_handler_pt handler, void *data,
                ngx_log_t *log)
{
    ngx_memzero(ev, sizeof(ngx_event_t));
    ev->handler = handler;
    ev->data = data;
    ev->log = log;
    // The link's own timers must not hold a gracefully exiting worker.
    ev->cancelable = 1;
}

}  // namespace

RedisLink::RedisLink(const RedisTarget &target, ngx_log_t *log) noexcept
    : target_(target), log_(log)
{
    init_timer(&connect_timer_, on_connect_timeout, this, log);
    init_timer(&reconnect_timer_, on_reconnect, this, log);
}

void RedisLink::start() noexcept
{
    connect();
}

void RedisLink::shutdown() noexcept
{
    closing_ = true;

    if (connect_timer_.timer_set) {
        ngx_del_timer(&connect_timer_);
    }

    if (reconnect_timer_.timer_set) {
        ngx_del_timer(&reconnect_timer_);
    }

    if (ac_ != nullptr) {
        redisAsyncFree(ac_);
    }
}

bool RedisLink::may_log() noexcept
{
    if (ngx_time() == last_log_) {
        return false;
    }

    last_log_ = ngx_time();
    return true;
}

void RedisLink::connect() noexcept
{
    redisAsyncContext *ac =
        target_.unix_path.len > 0
        ? redisAsyncConnectUnix(
              reinterpret_cast<const char *>(target_.unix_path.data))
        : redisAsyncConnect(reinterpret_cast<const char *>(target_.host.data),
                            target_.port);

    if (ac == nullptr || ac->err) {
        metrics::record_link_error(LinkError::kConnect);

        if (may_log()) {
            ngx_log_error(NGX_LOG_WARN, log_, 0,
                          "ratelimit: cannot connect to redis at \"%V\": %s",
                          &target_.display,
                          ac ? ac->errstr : "out of memory");
        }

        if (ac != nullptr) {
            redisAsyncFree(ac);
        }

        schedule_reconnect();
        return;
    }

    ac_ = ac;

    if (!attach()) {
        ac_ = nullptr;
        redisAsyncFree(ac);
        schedule_reconnect();
        return;
    }

    state_ = State::kConnecting;
    metrics::record_link_state(LinkState::kConnecting);
    ngx_add_timer(&connect_timer_, target_.connect_timeout);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    redisAsyncSetConnectCallback(ac, on_connect);
}

// Wraps hiredis's socket in an nginx connection so that the event loop
// watches it.  hiredis keeps owning the fd: see release_connection().
bool RedisLink::attach() noexcept
{
    ngx_connection_t *c = ngx_get_connection(ac_->c.fd, log_);

    if (c == nullptr) {
        if (may_log()) {
            ngx_log_error(NGX_LOG_WARN, log_, 0,
                          "ratelimit: no free connection for redis at "
                          "\"%V\"", &target_.display);
        }
        return false;
    }

    c->data = this;
    c->log = log_;
    c->read->log = log_;
    c->write->log = log_;
    c->read->handler = on_read;
    c->write->handler = on_write;
    conn_ = c;

    ac_->data = this;
    ac_->ev.data = this;
    ac_->ev.addRead = add_read;
    ac_->ev.delRead = del_read;
    ac_->ev.addWrite = add_write;
    ac_->ev.delWrite = del_write;
    ac_->ev.cleanup = cleanup;
    return true;
}

// AUTH and SELECT go first on the connection, so every call after them
// runs authenticated and in the right database without waiting for them.
void RedisLink::handshake() noexcept
{
    if (target_.password.len > 0) {
        const char *argv[3];
        size_t len[3];
        int argc = 0;

        argv[argc] = kAuth;
        len[argc++] = sizeof(kAuth) - 1;

        if (target_.user.len > 0) {
            argv[argc] = reinterpret_cast<const char *>(target_.user.data);
            len[argc++] = target_.user.len;
        }

        argv[argc] = reinterpret_cast<const char *>(target_.password.data);
        len[argc++] = target_.password.len;

        redisAsyncCommandArgv(ac_, on_handshake_reply,
                              const_cast<char *>(kAuth), argc, argv, len);
    }

    if (target_.db != 0) {
        u_char db[NGX_INT_T_LEN];
        const char *argv[2] = {kSelect, reinterpret_cast<const char *>(db)};
        size_t len[2] = {sizeof(kSelect) - 1,
                         static_cast<size_t>(ngx_sprintf(db, "%i", target_.db)
                                             - db)};

        redisAsyncCommandArgv(ac_, on_handshake_reply,
                              const_cast<char *>(kSelect), 2, argv, len);
    }

    std::string_view script = window_script();
    const char *argv[3] = {"SCRIPT", "LOAD", script.data()};
    size_t len[3] = {6, 4, script.size()};

    redisAsyncCommandArgv(ac_, on_handshake_reply,
                          const_cast<char *>(kScriptLoad), 3, argv, len);
}

void RedisLink::schedule_reconnect() noexcept
{
    if (closing_ || ngx_exiting || ngx_terminate || ngx_quit) {
        return;
    }

    ngx_msec_t delay = failures_ < 8 ? kFirstBackoff << failures_
                                     : kMaxBackoff;

    if (delay > kMaxBackoff) {
        delay = kMaxBackoff;
    }

    failures_++;

    if (!reconnect_timer_.timer_set) {
        ngx_add_timer(&reconnect_timer_, delay);
    }
}

// Called by hiredis just before it closes the fd: gives the nginx connection
// back without closing the fd (hiredis does that), since closing it twice
// could close a socket the kernel has already handed to someone else.
void RedisLink::release_connection() noexcept
{
    if (conn_ == nullptr) {
        return;
    }

    ngx_connection_t *c = conn_;

    unwatch(c->read, NGX_READ_EVENT);
    unwatch(c->write, NGX_WRITE_EVENT);

    if (c->read->posted) {
        ngx_delete_posted_event(c->read);
    }

    if (c->write->posted) {
        ngx_delete_posted_event(c->write);
    }

    if (connect_timer_.timer_set) {
        ngx_del_timer(&connect_timer_);
    }

    ngx_free_connection(c);
    c->fd = static_cast<ngx_socket_t>(-1);

    conn_ = nullptr;
    ac_ = nullptr;
    state_ = State::kDown;
    metrics::record_link_state(LinkState::kDown);
    schedule_reconnect();
}

RedisLink::SendResult RedisLink::send(Batch *batch,
                                      std::string_view command) noexcept
{
    if (state_ != State::kUp || ac_ == nullptr) {
        return SendResult::kDown;
    }

    if (redisAsyncFormattedCommand(ac_, on_reply, batch, command.data(),
                                   command.size())
        != REDIS_OK)
    {
        return SendResult::kDown;
    }

    if (in_flight_ == 0) {
        progress_msec_ = ngx_current_msec;
    }

    in_flight_++;

    // Never from inside hiredis: a failing write frees the context there,
    // under hiredis's feet.
    if (!writing_ && !(ac_->c.flags & REDIS_IN_CALLBACK)) {
        flush();
    }

    return SendResult::kSent;
}

void RedisLink::on_request_timeout() noexcept
{
    if (ac_ == nullptr || in_flight_ == 0
        || ngx_current_msec - progress_msec_ < kStallMs)
    {
        return;
    }

    metrics::record_link_error(LinkError::kClosed);

    if (may_log()) {
        ngx_log_error(NGX_LOG_WARN, log_, 0,
                      "ratelimit: redis at \"%V\" has answered nothing for "
                      "%M ms with %ui calls waiting, reconnecting",
                      &target_.display, ngx_current_msec - progress_msec_,
                      in_flight_);
    }

    redisAsyncFree(ac_);
}

// Edge-triggered where the event method can (epoll): the flag also goes to
// ngx_del_event, which re-registers the other direction with the flags it
// is given.
static ngx_uint_t event_flags()
{
    return (ngx_event_flags & NGX_USE_CLEAR_EVENT) ? ngx_uint_t{NGX_CLEAR_EVENT}
                                                   : ngx_uint_t{NGX_LEVEL_EVENT};
}

void RedisLink::watch(ngx_event_t *ev, ngx_uint_t event) noexcept
{
    if (ev->active) {
        return;
    }

    if (ngx_add_event(ev, event, event_flags()) != NGX_OK && may_log()) {
        ngx_log_error(NGX_LOG_ALERT, log_, 0,
                      "ratelimit: cannot watch the redis connection");
    }
}

void RedisLink::unwatch(ngx_event_t *ev, ngx_uint_t event) noexcept
{
    if (ev->active) {
        ngx_del_event(ev, event, event_flags());
    }
}

void RedisLink::on_connect(const redisAsyncContext *ac, int status) noexcept
{
    RedisLink *link = link_of(ac);

    if (status != REDIS_OK) {
        // hiredis frees the context when this returns; cleanup() follows.
        metrics::record_link_error(LinkError::kConnect);
        if (link->may_log()) {
            ngx_log_error(NGX_LOG_WARN, link->log_, 0,
                          "ratelimit: cannot connect to redis at \"%V\": %s",
                          &link->target_.display, ac->errstr);
        }
        return;
    }

    if (link->connect_timer_.timer_set) {
        ngx_del_timer(&link->connect_timer_);
    }

    link->state_ = State::kUp;
    metrics::record_link_state(LinkState::kUp);
    link->handshake();
}

void RedisLink::on_disconnect(const redisAsyncContext *ac,
                              int status) noexcept
{
    RedisLink *link = link_of(ac);

    if (status != REDIS_OK && !link->closing_) {
        metrics::record_link_error(LinkError::kClosed);
    }

    if (status != REDIS_OK && !link->closing_ && link->may_log()) {
        ngx_log_error(NGX_LOG_WARN, link->log_, 0,
                      "ratelimit: lost connection to redis at \"%V\": %s",
                      &link->target_.display,
                      ac->errstr ? ac->errstr : "closed");
    }
}

void RedisLink::on_reply(redisAsyncContext *ac, void *reply,
                         void *privdata) noexcept
{
    RedisLink *link = link_of(ac);
    auto *batch = static_cast<Batch *>(privdata);

    link->in_flight_--;
    link->progress_msec_ = ngx_current_msec;
    batch->owner->on_reply(batch, static_cast<const redisReply *>(reply));
}

void RedisLink::on_handshake_reply(redisAsyncContext *ac, void *reply,
                                   void *privdata) noexcept
{
    RedisLink *link = link_of(ac);
    auto *r = static_cast<const redisReply *>(reply);
    auto *step = static_cast<const char *>(privdata);

    if (r == nullptr) {
        return;
    }

    if (r->type == REDIS_REPLY_ERROR) {
        metrics::record_link_error(LinkError::kErrorReply);

        if (link->may_log()) {
            ngx_log_error(NGX_LOG_ERR, link->log_, 0,
                          "ratelimit: redis at \"%V\" refused %s: %*s",
                          &link->target_.display, step,
                          static_cast<size_t>(r->len), r->str);
        }

        // Freed when this callback returns, pending calls failing at once:
        // a graceful disconnect would wait for replies that may never come.
        link->state_ = State::kDown;
        redisAsyncFree(ac);
        return;
    }

    if (step == kScriptLoad) {
        link->failures_ = 0;
        ngx_log_error(NGX_LOG_INFO, link->log_, 0,
                      "ratelimit: connected to redis at \"%V\"",
                      &link->target_.display);
    }
}

// Edge-triggered: nothing tells us again about bytes left in the socket, and
// hiredis reads at most 16 KB a call, so read until the socket would block.
// An end of stream or a socket error counts as something to read: it often
// comes in the same event as the last bytes (an error reply, then close or
// reset), and hiredis must see it to drop the connection.
void RedisLink::on_read(ngx_event_t *ev) noexcept
{
    RedisLink *link = link_of(ev);

    while (link->ac_ != nullptr) {
        redisAsyncHandleRead(link->ac_);

        char byte;

        if (link->conn_ == nullptr
            || (recv(link->conn_->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) < 0
                && (errno == EAGAIN || errno == EWOULDBLOCK)))
        {
            return;
        }
    }
}

void RedisLink::on_write(ngx_event_t *ev) noexcept
{
    link_of(ev)->flush();
}

void RedisLink::flush() noexcept
{
    if (ac_ == nullptr) {
        return;
    }

    writing_ = true;
    redisAsyncHandleWrite(ac_);
    writing_ = false;
}

void RedisLink::on_connect_timeout(ngx_event_t *ev) noexcept
{
    auto *link = static_cast<RedisLink *>(ev->data);

    if (link->state_ != State::kConnecting || link->ac_ == nullptr) {
        return;
    }

    metrics::record_link_error(LinkError::kConnect);

    if (link->may_log()) {
        ngx_log_error(NGX_LOG_WARN, link->log_, 0,
                      "ratelimit: connecting to redis at \"%V\" timed out",
                      &link->target_.display);
    }

    redisAsyncFree(link->ac_);
}

void RedisLink::on_reconnect(ngx_event_t *ev) noexcept
{
    metrics::record_reconnect();
    static_cast<RedisLink *>(ev->data)->connect();
}

void RedisLink::add_read(void *data) noexcept
{
    auto *link = static_cast<RedisLink *>(data);

    if (link->conn_ != nullptr) {
        link->watch(link->conn_->read, NGX_READ_EVENT);
    }
}

void RedisLink::del_read(void *data) noexcept
{
    auto *link = static_cast<RedisLink *>(data);

    if (link->conn_ != nullptr) {
        link->unwatch(link->conn_->read, NGX_READ_EVENT);
    }
}

// Commands queued while the loop handles events are written together by one
// posted write at the end of the loop turn, without asking epoll; only a
// connect in progress or a socket that took less than all waits for
// writability.
void RedisLink::add_write(void *data) noexcept
{
    auto *link = static_cast<RedisLink *>(data);
    ngx_connection_t *c = link->conn_;

    if (c == nullptr) {
        return;
    }

    if (link->state_ != State::kUp || link->writing_) {
        link->watch(c->write, NGX_WRITE_EVENT);
    } else if (!c->write->posted) {
        ngx_post_event(c->write, &ngx_posted_events);
    }
}

void RedisLink::del_write(void *data) noexcept
{
    auto *link = static_cast<RedisLink *>(data);

    if (link->conn_ != nullptr) {
        link->unwatch(link->conn_->write, NGX_WRITE_EVENT);
    }
}

void RedisLink::cleanup(void *data) noexcept
{
    static_cast<RedisLink *>(data)->release_connection();
}

}  // namespace ratelimit
