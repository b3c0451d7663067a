#include "status/top_handler.hpp"

#include <new>

#include "redis/redis_link.hpp"
#include "report/top_json.hpp"
#include "status/status_handler.hpp"
#include "worker/worker_objects.hpp"

namespace ratelimit {

namespace {

// A slice is read once this long after its end: every server's timer
// (a second apart) has flushed it by then, and its call come back.
constexpr std::uint64_t kFlushedAfterS = 2;

// The read waits for Redis as a write of the status API does
// (status_write.hpp): the record outlives a request answered or gone
// until its reply comes; the reply is acted on from the posted event.
struct TopRead {
    ngx_http_request_t *r;   // nullptr once answered or gone
    ngx_pool_cleanup_t *cln;
    const Zone *zone;
    std::string base;
    std::uint64_t to;        // Unix seconds, a slice's start
    std::uint64_t n;
    ngx_event_t ev{};        // the timeout, then the reply posted
    TopAnswer answer;
    bool answered = false;   // a valid reply came
    bool replied = false;
    bool retried = false;    // sent again with EVAL after NOSCRIPT
};

bool send_read(TopRead *read, bool eval) noexcept;

void read_gone(void *data) noexcept
{
    auto *read = static_cast<TopRead *>(data);

    read->r = nullptr;
    stop_timer(&read->ev);

    if (read->ev.posted) {
        ngx_delete_posted_event(&read->ev);
    }

    if (read->replied) {
        delete read;
    }
}

ngx_int_t send_top(ngx_http_request_t *r, const TopRead &read)
{
    TopReport report{view(read.zone->name), read.to - kTopWindowS, read.to,
                     &read.answer};
    auto *body = static_cast<u_char *>(
        ngx_pnalloc(r->pool, top_json_max_size(report)));

    if (body == nullptr) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    size_t len = write_top_json(report, reinterpret_cast<char *>(body));
    return send_body(r, NGX_HTTP_OK, "application/json", body, len);
}

void on_read_event(ngx_event_t *ev) noexcept
{
    auto *read = static_cast<TopRead *>(ev->data);
    ngx_http_request_t *r = read->r;
    ngx_int_t rc;

    read->cln->handler = nullptr;
    read->r = nullptr;

    if (ev->timedout) {
        ev->timedout = 0;
        worker_objects().link->on_request_timeout();
        rc = send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, "redis timed out");
    } else if (read->answered) {
        rc = send_top(r, *read);
    } else {
        rc = send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, "redis unavailable");
    }

    if (read->replied) {
        delete read;
    }

    ngx_http_finalize_request(r, rc);
}

void on_read_reply(void *data, const Reply *reply) noexcept
{
    auto *read = static_cast<TopRead *>(data);

    if (reply != nullptr && top_no_script(*reply) && !read->retried) {
        read->retried = true;

        if (send_read(read, true)) {
            return;
        }
    }

    read->replied = true;

    if (read->r == nullptr) {
        delete read;
        return;
    }

    try {
        read->answered = reply != nullptr && decode_top_read(
                             *reply, &read->answer) == TopReplyKind::kAnswer;
    } catch (...) {
        read->answered = false;
    }

    stop_timer(&read->ev);
    ngx_post_event(&read->ev, &ngx_posted_events);
}

bool send_read(TopRead *read, bool eval) noexcept
{
    RedisLink *link = worker_objects().link;
    std::string command;

    try {
        command = top_read_call(read->base, read->to, read->n, eval);
    } catch (...) {
        return false;
    }

    return link != nullptr && link->up()
           && link->send_for_key(read->base, command, on_read_reply, read);
}

// The rate zone ?zone= names among the location's, keeping its top;
// nullptr, and the error to answer 400 with in *error, if none.
const Zone *read_top_zone(ngx_http_request_t *r, const char **error)
{
    const Zone *zone = query_zone(r, "missing zone: use ?zone=NAME&top=N",
                                  error);

    if (zone != nullptr && zone->concurrency != nullptr) {
        *error = "a concurrency zone keeps no top subjects";
        return nullptr;
    }

    if (zone != nullptr && zone->top == 0) {
        *error = "the zone keeps no top subjects: it has top=off";
        return nullptr;
    }

    return zone;
}

}  // namespace

ngx_int_t top_handler(ngx_http_request_t *r, const ngx_str_t &top) noexcept
{
    ngx_int_t rc = ngx_http_discard_request_body(r);

    if (rc != NGX_OK) {
        return rc;
    }

    ngx_int_t n = ngx_atoi(top.data, top.len);
    const char *error = nullptr;
    const Zone *zone = read_top_zone(r, &error);

    if (zone == nullptr) {
        return send_error(r, NGX_HTTP_BAD_REQUEST, error);
    }

    if (n < 1 || static_cast<std::uint64_t>(n) > kTopMaxRead) {
        return send_error(r, NGX_HTTP_BAD_REQUEST,
                          "top must be a number from 1 to 100");
    }

    RedisLink *link = worker_objects().link;
    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(r->pool, 0);
    auto now_s = static_cast<std::uint64_t>(ngx_time());

    if (cln == nullptr) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    auto *read = new (std::nothrow) TopRead{
        r, cln, zone, {},
        (now_s - kFlushedAfterS) / kTopSliceS * kTopSliceS,
        static_cast<std::uint64_t>(n), {}, {}, false, false, false};

    try {
        if (read != nullptr && link != nullptr) {
            read->base = top_base(view(main_conf(r)->prefix),
                                  view(zone->name), link->clustered());
        }
    } catch (...) {
        delete read;
        read = nullptr;
    }

    if (read == nullptr || read->base.empty()) {
        delete read;
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (!send_read(read, false)) {
        delete read;
        return send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                          "redis unavailable");
    }

    cln->handler = read_gone;
    cln->data = read;
    init_event(&read->ev, on_read_event, read, r->connection->log);
    ngx_add_timer(&read->ev, main_conf(r)->redis->timeout);
    r->main->count++;
    return NGX_DONE;
}

}  // namespace ratelimit
