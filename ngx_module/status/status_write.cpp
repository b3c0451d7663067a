#include "status/status_write.hpp"

#include <new>

#include "cluster/cluster_slot.hpp"
#include "keys/subject_key.hpp"
#include "limits/deny_cache.hpp"
#include "metrics/metrics.hpp"
#include "redis/redis_link.hpp"
#include "status/status_handler.hpp"
#include "worker/worker_objects.hpp"

namespace ratelimit {

namespace {

void request_gone(void *data) noexcept
{
    auto *write = static_cast<StatusWrite *>(data);

    write->r = nullptr;
    stop_timer(&write->ev);

    if (write->ev.posted) {
        ngx_delete_posted_event(&write->ev);
    }

    if (write->replied) {
        delete write;
    }
}

// The reply posted, or the timeout: the write's answer.  A timed-out
// write may still be done by Redis: the answer says so.
void on_write_event(ngx_event_t *ev) noexcept
{
    auto *write = static_cast<StatusWrite *>(ev->data);
    ngx_http_request_t *r = write->r;
    ngx_int_t rc;

    write->cln->handler = nullptr;
    write->r = nullptr;

    if (ev->timedout) {
        ev->timedout = 0;
        metrics::record_link_error(LinkError::kTimeout);
        worker_objects().link->on_request_timeout();
        rc = send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, write->unsure);
    } else if (write->told >= 0) {
        rc = write->done(r, *write);
    } else {
        rc = send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, "redis unavailable");
    }

    if (write->replied) {
        delete write;
    }

    ngx_http_finalize_request(r, rc);
}

// The rate zone ?zone= names among the location's; nullptr, and the error
// to answer 400 with in *error, if none.
const Zone *read_zone(ngx_http_request_t *r, const char **error)
{
    const Zone *zone = query_zone(r, "missing zone: use ?zone=NAME&key=...",
                                  error);

    if (zone != nullptr && zone->concurrency != nullptr) {
        *error = "a concurrency zone counts requests in flight: "
                 "nothing to forgive or limit per subject";
        return nullptr;
    }

    return zone;
}

bool read_integer(const Reply &reply, long long *out)
{
    if (reply.type != Reply::Type::kInteger) {
        return false;
    }

    *out = reply.integer;
    return true;
}

}  // namespace

const Zone *start_write(ngx_http_request_t *r, ngx_str_t *subject,
                        ngx_int_t *rc) noexcept
{
    *rc = ngx_http_discard_request_body(r);

    if (*rc != NGX_OK) {
        return nullptr;
    }

    const char *error = nullptr;
    const Zone *zone = read_zone(r, &error);

    if (zone == nullptr || (error = read_subject(r, subject)) != nullptr) {
        *rc = send_error(r, NGX_HTTP_BAD_REQUEST, error);
        return nullptr;
    }

    return zone;
}

StatusWrite *new_write(ngx_http_request_t *r, const Zone *zone,
                       const ngx_str_t &subject, WriteDone done,
                       const char *unsure) noexcept
{
    ngx_str_t key;
    ngx_pool_cleanup_t *cln = make_subject_key(r, *zone, subject, &key)
                              && worker_objects().forgive != nullptr
                              ? ngx_pool_cleanup_add(r->pool, 0) : nullptr;

    if (cln == nullptr) {
        return nullptr;
    }

    return new (std::nothrow) StatusWrite{r, cln, zone, subject, key, done,
                                          unsure, {}};
}

// The reply of the EVAL that made the change and published it: the number
// of subscribers the message reached, alone (DELETE) or with the limit of
// the override replaced (PUT).
void write_answered(void *data, const Reply *reply) noexcept
{
    auto *write = static_cast<StatusWrite *>(data);

    write->replied = true;

    if (write->r == nullptr) {
        delete write;
        return;
    }

    if (reply != nullptr && reply->type == Reply::Type::kArray
        && reply->elements == 2 && read_integer(reply->element[1],
                                                &write->was))
    {
        reply = &reply->element[0];
    }

    if (reply != nullptr && !read_integer(*reply, &write->told)) {
        write->told = -1;
    }

    stop_timer(&write->ev);
    ngx_post_event(&write->ev, &ngx_posted_events);
}

ngx_int_t await_write(ngx_http_request_t *r, StatusWrite *write,
                      bool sent) noexcept
{
    if (!sent) {
        delete write;
        return send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                          "redis unavailable");
    }

    worker_objects().denied->forget(view(write->key), ngx_current_msec);
    write->cln->handler = request_gone;
    write->cln->data = write;
    init_event(&write->ev, on_write_event, write, r->connection->log);
    ngx_add_timer(&write->ev, main_conf(r)->redis->timeout);
    r->main->count++;
    return NGX_DONE;
}

bool side_keys(ngx_http_request_t *r, const Zone &zone, const ngx_str_t &key,
               ngx_str_t *side, ngx_str_t *marker) noexcept
{
    const ngx_str_t &base = zone.side_base;
    side->data = static_cast<u_char *>(ngx_pnalloc(r->pool,
                                                   base.len + key.len));
    marker->data = static_cast<u_char *>(
        ngx_pnalloc(r->pool, base.len + kSlotTagMaxSize));

    if (side->data == nullptr || marker->data == nullptr) {
        return false;
    }

    side->len = write_side_key(view(base), view(key),
                               reinterpret_cast<char *>(side->data));
    marker->len = base.len;
    ngx_memcpy(marker->data, base.data, base.len);

    if (worker_objects().link->clustered()) {
        marker->len += write_slot_tag(
            key_slot(view(*side)),
            reinterpret_cast<char *>(marker->data) + base.len);
    }

    return true;
}

}  // namespace ratelimit
