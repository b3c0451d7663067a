#include "redis/redis_link.hpp"

#include <new>

#include "metrics/metrics.hpp"

namespace ratelimit {

namespace {

// A connection that stayed up this long was a success: the next failure
// starts the backoff afresh.  A server that takes the connection and then
// refuses the script keeps backing off.
constexpr ngx_msec_t kSettledMs = 1000;

// How often a worker connected through sentinels asks them again where the
// master is.  A coordinated failover (SENTINEL FAILOVER) leaves the old
// master writable, connections and all, until the sentinels demote it,
// which takes seconds: counts written there meanwhile are lost with its
// data.  One question a second, on a connection kept open to the sentinel,
// bounds that.
constexpr ngx_msec_t kSentinelCheckMs = 1000;

bool is_master(const Reply *reply)
{
    return reply->type == Reply::Type::kArray && reply->elements > 0
           && reply->element[0].type == Reply::Type::kString
           && reply->element[0].text == "master";
}

}  // namespace

RedisLink::RedisLink(const MainConf &mcf, ngx_log_t *log) noexcept
    : target_(*mcf.redis), tls_(mcf.tls.enable == 1 ? &mcf.tls : nullptr),
      resolver_(mcf.resolver), resolver_timeout_(mcf.resolver_timeout),
      log_(log), conn_(this, &throttle_, log),
      sentinels_(*mcf.redis, tls_, &throttle_, log, on_master, this)
{
    init_event(&reconnect_timer_, on_reconnect, this, log);
    init_event(&drop_, on_drop, this, log);
    init_event(&check_timer_, on_check, this, log);
}

RedisLink::~RedisLink()
{
    shutdown();
}

bool RedisLink::on_up(UpHandler handler, void *data) noexcept
{
    if (listener_count_ == kMaxListeners) {
        return false;
    }

    listeners_[listener_count_++] = {handler, data};
    return true;
}

void RedisLink::connect_first() noexcept
{
    if (target_.cluster) {
        cluster_.reset(new (std::nothrow) RedisCluster(target_, tls_,
                                                       &throttle_, log_));

        if (cluster_ != nullptr) {
            cluster_->ask_first_map();
        }
        return;
    }

    connect();
}

void RedisLink::shutdown() noexcept
{
    closing_ = true;
    up_ = false;

    stop_timer(&reconnect_timer_);

    stop_timer(&check_timer_);

    if (drop_.posted) {
        ngx_delete_posted_event(&drop_);
    }

    if (resolving_ != nullptr) {
        ngx_resolve_name_done(resolving_);
        resolving_ = nullptr;
    }

    sentinels_.cancel();
    conn_.close();

    if (cluster_ != nullptr) {
        cluster_->shutdown();
    }
}

// Only where connecting again can find another server: a fixed address
// would give the same replica back.
void RedisLink::on_error_reply(std::string_view error) noexcept
{
    if (cluster_ != nullptr) {
        return;
    }

    bool movable = target_.sentinel_master.len > 0
                   || (target_.first().named && resolver_ != nullptr);

    if (movable && error.substr(0, 8) == "READONLY" && up_
        && !drop_.posted)
    {
        if (may_log()) {
            ngx_log_error(NGX_LOG_WARN, log_, 0,
                          "ratelimit: redis at \"%V\" is read-only, "
                          "reconnecting", &conn_.display());
        }
        ngx_post_event(&drop_, &ngx_posted_events);
    }
}

void RedisLink::reconnect() noexcept
{
    if (!drop_.posted) {
        ngx_post_event(&drop_, &ngx_posted_events);
    }
}

// Called from a reply's handler: the connection is closed from the event
// loop, not under the reply being handed out.
void RedisLink::on_drop(ngx_event_t *ev) noexcept
{
    auto *link = static_cast<RedisLink *>(ev->data);

    link->up_ = false;
    link->conn_.close();
    metrics::record_link_state(LinkState::kDown);
    link->schedule_reconnect();
}

void RedisLink::connect() noexcept
{
    if (closing_) {
        return;
    }

    metrics::record_link_state(LinkState::kConnecting);

    if (target_.sentinel_master.len > 0) {
        sentinels_.ask_for_master();
        return;
    }

    const RedisAddress &address = target_.first();

    if (address.named && resolver_ != nullptr) {
        resolve(address);
        return;
    }

    connect_to(address.addr.sockaddr, address.addr.socklen, address.text,
               address.host);
}

void RedisLink::connect_to(const sockaddr *sa, socklen_t len,
                           const ngx_str_t &display,
                           const ngx_str_t &host) noexcept
{
    if (!conn_.open({sa, len, display, host, &target_.data, tls_,
                     target_.connect_timeout}))
    {
        metrics::record_link_error(LinkError::kConnect);
        tell_trouble();
        schedule_reconnect();
    }
}

void RedisLink::resolve(const RedisAddress &address) noexcept
{
    ngx_resolver_ctx_t *ctx = ngx_resolve_start(resolver_, nullptr);

    if (ctx == nullptr || ctx == NGX_NO_RESOLVER) {
        schedule_reconnect();
        return;
    }

    ctx->name = address.host;
    ctx->handler = on_resolved;
    ctx->data = this;
    ctx->timeout = resolver_timeout_;
    // A lookup under way must not hold a gracefully exiting worker.
    ctx->cancelable = 1;
    resolving_ = ctx;

    // The handler may run before this returns, with a cached answer.
    if (ngx_resolve_name(ctx) != NGX_OK) {
        resolving_ = nullptr;
        schedule_reconnect();
    }
}

void RedisLink::on_resolved(ngx_resolver_ctx_t *ctx) noexcept
{
    auto *link = static_cast<RedisLink *>(ctx->data);
    const RedisAddress &address = link->target_.first();

    link->resolving_ = nullptr;

    if (ctx->state != 0 || ctx->naddrs == 0) {
        if (link->may_log()) {
            ngx_log_error(NGX_LOG_WARN, link->log_, 0,
                          "ratelimit: cannot resolve redis at \"%V\": %s",
                          &address.text, ngx_resolver_strerror(ctx->state));
        }
        ngx_resolve_name_done(ctx);
        link->tell_trouble();
        link->schedule_reconnect();
        return;
    }

    const ngx_resolver_addr_t &found = ctx->addrs[0];
    bool moved = link->addr_len_ != found.socklen
                 || ngx_cmp_sockaddr(&link->addr_.sockaddr, link->addr_len_,
                                     found.sockaddr, found.socklen, 0)
                    != NGX_OK;

    ngx_memcpy(&link->addr_, found.sockaddr, found.socklen);
    link->addr_len_ = found.socklen;
    ngx_resolve_name_done(ctx);
    ngx_inet_set_port(&link->addr_.sockaddr, address.port);

    if (moved) {
        size_t len = ngx_sock_ntop(&link->addr_.sockaddr, link->addr_len_,
                                   link->addr_text_, NGX_SOCKADDR_STRLEN, 1);
        ngx_log_error(NGX_LOG_NOTICE, link->log_, 0,
                      "ratelimit: redis at \"%V\" resolved to %*s",
                      &address.text, len, link->addr_text_);
    }

    link->connect_to(&link->addr_.sockaddr, link->addr_len_, address.text,
                     address.host);
}

void RedisLink::on_master(void *data, const sockaddr *sa, socklen_t len,
                          const ngx_str_t &text,
                          const ngx_str_t &host) noexcept
{
    auto *link = static_cast<RedisLink *>(data);

    if (link->up_) {
        link->on_check_answer(sa, len, text, host);
        return;
    }

    if (sa == nullptr) {
        if (link->may_log()) {
            ngx_log_error(NGX_LOG_WARN, link->log_, 0,
                          "ratelimit: no sentinel could tell where redis "
                          "master \"%V\" is",
                          &link->target_.sentinel_master);
        }
        link->tell_trouble();
        link->schedule_reconnect();
        return;
    }

    link->connect_to_master(sa, len, text, host);
}

// The master is checked against the address the sentinel gave, kept here
// with the rest of the peer: the sentinel's copy changes with its next
// answer.
void RedisLink::connect_to_master(const sockaddr *sa, socklen_t len,
                                  const ngx_str_t &text,
                                  const ngx_str_t &host) noexcept
{
    ngx_memcpy(&addr_, sa, len);
    addr_len_ = len;
    ngx_memcpy(addr_text_, text.data, text.len);
    display_ = {text.len, addr_text_};
    *ngx_cpymem(master_host_, host.data, host.len) = '\0';
    connect_to(&addr_.sockaddr, len, display_, {host.len, master_host_});
}

// The periodic question, answered while connected: a master elsewhere is
// followed at once.
void RedisLink::on_check_answer(const sockaddr *sa, socklen_t len,
                                const ngx_str_t &text,
                                const ngx_str_t &host) noexcept
{
    if (sa == nullptr
        || ngx_cmp_sockaddr(const_cast<sockaddr *>(sa), len,
                            &addr_.sockaddr, addr_len_, 1) == NGX_OK)
    {
        ngx_add_timer(&check_timer_, kSentinelCheckMs);
        return;
    }

    up_ = false;
    conn_.close();
    metrics::record_link_state(LinkState::kConnecting);
    connect_to_master(sa, len, text, host);
}

void RedisLink::on_check(ngx_event_t *ev) noexcept
{
    auto *link = static_cast<RedisLink *>(ev->data);

    if (link->up_) {
        link->sentinels_.ask_for_master();
    }
}

void RedisLink::on_open(RedisConnection *conn) noexcept
{
    if (target_.sentinel_master.len == 0) {
        conn->settle();
        became_up();
        return;
    }

    // A sentinel may name a master that has just become a replica: ROLE
    // says, before any call is sent.  The connect timer bounds the answer.
    static const char kRole[] = "ROLE";
    const char *argv[1] = {kRole};
    size_t lens[1] = {sizeof(kRole) - 1};

    if (!conn->send_argv(1, argv, lens, on_role, this)) {
        conn->close();
        schedule_reconnect();
    }
}

void RedisLink::on_role(void *data, const Reply *reply) noexcept
{
    auto *link = static_cast<RedisLink *>(data);

    if (reply == nullptr) {
        return;
    }

    if (!is_master(reply)) {
        if (link->may_log()) {
            ngx_log_error(NGX_LOG_WARN, link->log_, 0,
                          "ratelimit: redis at \"%V\" is not the master of "
                          "\"%V\", asking the sentinels again",
                          &link->conn_.display(),
                          &link->target_.sentinel_master);
        }
        link->reconnect();
        return;
    }

    link->conn_.settle();
    link->log_master();
    link->became_up();

    if (!link->check_timer_.timer_set) {
        ngx_add_timer(&link->check_timer_, kSentinelCheckMs);
    }
}

// Once per worker and change of master, whatever the log rate.
void RedisLink::log_master() noexcept
{
    const ngx_str_t &now = display_;

    if (master_len_ == now.len
        && ngx_strncmp(master_text_, now.data, now.len) == 0)
    {
        return;
    }

    if (master_len_ == 0) {
        ngx_log_error(NGX_LOG_NOTICE, log_, 0,
                      "ratelimit: redis master \"%V\" is at %V",
                      &target_.sentinel_master, &now);
    } else {
        ngx_log_error(NGX_LOG_WARN, log_, 0,
                      "ratelimit: redis master \"%V\" moved from %*s to %V",
                      &target_.sentinel_master, master_len_, master_text_,
                      &now);
    }

    ngx_memcpy(master_text_, now.data, now.len);
    master_len_ = now.len;
}

void RedisLink::became_up() noexcept
{
    up_ = true;
    up_since_ = ngx_current_msec;
    metrics::record_link_state(LinkState::kUp);
    ngx_log_error(NGX_LOG_INFO, log_, 0,
                  "ratelimit: connected to redis at \"%V\"%s",
                  &conn_.display(),
                  conn_.tls_resumed() ? " (TLS session resumed)" : "");

    if (!probe_.ask(&conn_, log_)) {
        reconnect();
        return;
    }

    for (ngx_uint_t i = 0; i < listener_count_ && up_; i++) {
        listeners_[i].handler(listeners_[i].data);
    }
}

void RedisLink::on_close(RedisConnection *) noexcept
{
    if (up_ && ngx_current_msec - up_since_ >= kSettledMs) {
        failures_ = 0;
    }

    metrics::record_link_error(up_ ? LinkError::kClosed : LinkError::kConnect);
    metrics::record_link_state(LinkState::kDown);
    up_ = false;
    tell_trouble();
    schedule_reconnect();
}

void RedisLink::tell_trouble() noexcept
{
    if (trouble_.handler != nullptr && !closing_) {
        trouble_.handler(trouble_.data);
    }
}

void RedisLink::schedule_reconnect() noexcept
{
    if (closing_ || ngx_exiting || ngx_terminate || ngx_quit
        || reconnect_timer_.timer_set)
    {
        return;
    }

    ngx_add_timer(&reconnect_timer_, reconnect_delay(failures_++));
}

void RedisLink::on_reconnect(ngx_event_t *ev) noexcept
{
    metrics::record_reconnect();
    static_cast<RedisLink *>(ev->data)->connect();
}

}  // namespace ratelimit
