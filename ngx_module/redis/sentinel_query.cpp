#include "redis/sentinel_query.hpp"

namespace ratelimit {

namespace {

const RedisAddress &sentinel_at(const RedisTarget &target, ngx_uint_t i)
{
    return static_cast<const RedisAddress *>(target.addresses.elts)[i];
}

// "IP" and "PORT" as sentinels answer them, into a socket address.
bool parse_master(const Reply *reply, ngx_sockaddr_t *sa, socklen_t *len)
{
    if (reply->type != Reply::Type::kArray || reply->elements != 2
        || reply->element[0].type != Reply::Type::kString
        || reply->element[1].type != Reply::Type::kString)
    {
        return false;
    }

    std::string_view ip = reply->element[0].text;
    std::string_view port_text = reply->element[1].text;
    ngx_int_t port = ngx_atoi(reinterpret_cast<u_char *>(
                                  const_cast<char *>(port_text.data())),
                              port_text.size());

    return port != NGX_ERROR
           && make_sockaddr(ip, static_cast<int>(port), sa, len);
}

}  // namespace

SentinelQuery::SentinelQuery(const RedisTarget &target, const RedisTls *tls,
                             LogThrottle *throttle, ngx_log_t *log,
                             Found found, void *data) noexcept
    : target_(target), tls_(tls), throttle_(throttle), log_(log),
      found_(found), data_(data), conn_(this, throttle, log)
{
    init_event(&next_, on_next, this, log);
    init_event(&timer_, on_timeout, this, log);
}

void SentinelQuery::ask_for_master() noexcept
{
    if (querying_) {
        return;
    }

    querying_ = true;
    asked_ = 0;

    // The sentinel that answered last keeps its connection: asked again
    // on it, without a new connect and AUTH.
    if (conn_.is_open()) {
        asked_ = 1;
        ngx_add_timer(&timer_, target_.connect_timeout);
        on_open(&conn_);
        return;
    }

    ask();
}

void SentinelQuery::cancel() noexcept
{
    querying_ = false;

    if (next_.posted) {
        ngx_delete_posted_event(&next_);
    }

    stop_timer(&timer_);

    conn_.close();
}

void SentinelQuery::ask() noexcept
{
    while (asked_ < target_.addresses.nelts) {
        const RedisAddress &sentinel = sentinel_at(target_, current_);
        asked_++;

        if (conn_.open({sentinel.addr.sockaddr, sentinel.addr.socklen,
                        sentinel.text, sentinel.host, &target_.sentinel, tls_,
                        target_.connect_timeout}))
        {
            ngx_add_timer(&timer_, target_.connect_timeout);
            return;
        }

        current_ = (current_ + 1) % target_.addresses.nelts;
    }

    done(nullptr, 0);
}

void SentinelQuery::on_open(RedisConnection *conn) noexcept
{
    static const char kSentinel[] = "SENTINEL";
    static const char kGetMaster[] = "get-master-addr-by-name";
    const char *argv[3] = {kSentinel, kGetMaster,
                           reinterpret_cast<const char *>(
                               target_.sentinel_master.data)};
    size_t lens[3] = {sizeof(kSentinel) - 1, sizeof(kGetMaster) - 1,
                      target_.sentinel_master.len};

    if (!conn->send_argv(3, argv, lens, on_reply, this)) {
        next();
    }
}

// Closed before it answered (or, idle, between queries): the next sentinel.
void SentinelQuery::on_close(RedisConnection *) noexcept
{
    if (querying_) {
        ngx_post_event(&next_, &ngx_posted_events);
    }
}

void SentinelQuery::on_reply(void *data, const Reply *reply) noexcept
{
    if (reply != nullptr) {
        static_cast<SentinelQuery *>(data)->answer(reply);
    }
}

void SentinelQuery::answer(const Reply *reply) noexcept
{
    if (!querying_) {
        return;
    }

    if (!parse_master(reply, &master_, &master_len_)) {
        bool error = reply->type == Reply::Type::kError;

        if (throttle_->allow()) {
            LoggedText text(error ? reply->text : std::string_view());
            ngx_log_error(NGX_LOG_WARN, log_, 0,
                          "ratelimit: sentinel at \"%V\" does not know "
                          "master \"%V\"%s%V",
                          &sentinel_at(target_, current_).text,
                          &target_.sentinel_master, error ? ": " : "",
                          text.str());
        }

        next();
        return;
    }

    // Shorter than NGX_SOCKADDR_STRLEN: parse_master() took it for an IP.
    std::string_view ip = reply->element[0].text;

    ngx_memcpy(master_host_, ip.data(), ip.size());
    master_host_[ip.size()] = '\0';
    master_host_len_ = ip.size();

    conn_.settle();
    done(&master_.sockaddr, master_len_);
}

// This sentinel will not do: the next one, from the event loop.
void SentinelQuery::next() noexcept
{
    conn_.close();
    ngx_post_event(&next_, &ngx_posted_events);
}

void SentinelQuery::done(const sockaddr *sa, socklen_t len) noexcept
{
    querying_ = false;

    stop_timer(&timer_);

    ngx_str_t text = ngx_null_string;
    ngx_str_t host = ngx_null_string;

    if (sa != nullptr) {
        text.data = master_text_;
        text.len = ngx_sock_ntop(&master_.sockaddr, master_len_,
                                 master_text_, NGX_SOCKADDR_STRLEN, 1);
        host = {master_host_len_, master_host_};
    }

    found_(data_, sa, len, text, host);
}

void SentinelQuery::on_next(ngx_event_t *ev) noexcept
{
    auto *query = static_cast<SentinelQuery *>(ev->data);

    if (!query->querying_) {
        return;
    }

    stop_timer(&query->timer_);

    query->current_ = (query->current_ + 1) % query->target_.addresses.nelts;
    query->ask();
}

void SentinelQuery::on_timeout(ngx_event_t *ev) noexcept
{
    auto *query = static_cast<SentinelQuery *>(ev->data);

    if (query->throttle_->allow()) {
        ngx_log_error(NGX_LOG_WARN, query->log_, 0,
                      "ratelimit: sentinel at \"%V\" did not answer "
                      "within %M ms",
                      &sentinel_at(query->target_, query->current_).text,
                      query->target_.connect_timeout);
    }

    query->next();
}

}  // namespace ratelimit
