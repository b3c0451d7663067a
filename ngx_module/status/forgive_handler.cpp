#include "status/forgive_handler.hpp"

#include <new>

#include "keys/subject_key.hpp"
#include "limits/deny_cache.hpp"
#include "metrics/metrics.hpp"
#include "redis/redis_link.hpp"
#include "rate/forgive_listener.hpp"
#include "request/request_state.hpp"
#include "status/status_handler.hpp"
#include "worker/worker_objects.hpp"

namespace ratelimit {

namespace {

// One DELETE waiting for Redis.  Redis answers every call, or the link
// hands it nullptr, so the record outlives a request that was answered or
// terminated meanwhile; it goes when both the reply has come and the
// request no longer waits for it.  The request waits `timeout` at most, as
// every request of the module: past it, it is answered 503 and the late
// reply only frees the record.  The reply is acted on from the event loop
// (the posted `ev`), never from inside hiredis.
struct ForgiveCall {
    ngx_http_request_t *r;   // nullptr once answered or gone
    ngx_pool_cleanup_t *cln;
    const Zone *zone;
    ngx_str_t subject;       // in r's pool: read only while r lives
    ngx_event_t ev{};        // the timeout, then the reply posted
    long long told = -1;     // subscribers reached; -1: no valid reply
    bool replied = false;
};

void request_gone(void *data) noexcept
{
    auto *call = static_cast<ForgiveCall *>(data);

    call->r = nullptr;
    stop_timer(&call->ev);

    if (call->ev.posted) {
        ngx_delete_posted_event(&call->ev);
    }

    if (call->replied) {
        delete call;
    }
}

void log_forgiven(ngx_http_request_t *r, const ForgiveCall *call)
{
    char subject[printable_subject_max_size()];
    size_t len = write_printable_subject(view(call->subject), subject);

    ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0,
                  "ratelimit: zone \"%V\", key \"%*s\" forgiven, %L "
                  "workers told", &call->zone->name, len, subject, call->told);
}

// The reply of the EVAL that deleted the key and published the forgiving:
// the number of subscribers the message reached.
void answered(void *data, const Reply *reply) noexcept
{
    auto *call = static_cast<ForgiveCall *>(data);

    call->replied = true;

    if (call->r == nullptr) {
        delete call;
        return;
    }

    if (reply != nullptr && reply->type == Reply::Type::kInteger) {
        call->told = reply->integer;
    }

    stop_timer(&call->ev);
    ngx_post_event(&call->ev, &ngx_posted_events);
}

// The reply posted, or the timeout: the DELETE's answer.  A timed-out
// forgiving may still be done by Redis: the answer says so.
void on_forgive_event(ngx_event_t *ev) noexcept
{
    auto *call = static_cast<ForgiveCall *>(ev->data);
    ngx_http_request_t *r = call->r;
    ngx_int_t rc;

    call->cln->handler = nullptr;
    call->r = nullptr;

    if (ev->timedout) {
        ev->timedout = 0;
        metrics::record_link_error(LinkError::kTimeout);
        worker_objects().link->on_request_timeout();
        rc = send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                        "redis timed out: the key may or may not be "
                        "forgiven, try again");
    } else if (call->told >= 0) {
        log_forgiven(r, call);
        rc = NGX_HTTP_NO_CONTENT;
    } else {
        rc = send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, "redis unavailable");
    }

    if (call->replied) {
        delete call;
    }

    ngx_http_finalize_request(r, rc);
}

// The rate zone ?zone= names among the location's; nullptr, and the error
// to answer 400 with in *error, if none.  The name given is not echoed:
// it is the client's text.
const Zone *read_zone(ngx_http_request_t *r, const char **error)
{
    const LocConf *lcf = loc_conf(r);
    ngx_str_t name;

    if (ngx_http_arg(r, (u_char *) "zone", 4, &name) != NGX_OK
        || name.len == 0)
    {
        *error = "missing zone: use ?zone=NAME&key=...";
        return nullptr;
    }

    auto *refs = static_cast<const ZoneRef *>(lcf->query->elts);

    for (ngx_uint_t i = 0; i < lcf->query->nelts; i++) {
        const Zone *zone = refs[i].zone;

        if (view(zone->name) != view(name)) {
            continue;
        }

        if (zone->concurrency != nullptr) {
            *error = "a concurrency zone counts requests in flight: "
                     "nothing to forgive";
            return nullptr;
        }

        return zone;
    }

    *error = "no such zone here: name one of this location's "
             "ratelimit_query zones";
    return nullptr;
}

ngx_int_t forgive(ngx_http_request_t *r)
{
    ngx_int_t rc = ngx_http_discard_request_body(r);

    if (rc != NGX_OK) {
        return rc;
    }

    const char *error = nullptr;
    const Zone *zone = read_zone(r, &error);
    ngx_str_t subject, key;

    if (zone == nullptr || (error = read_subject(r, &subject)) != nullptr) {
        return send_error(r, NGX_HTTP_BAD_REQUEST, error);
    }

    if (!make_subject_key(r, *zone, subject, &key)) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    WorkerObjects &worker = worker_objects();
    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(r->pool, 0);
    auto *call = new (std::nothrow) ForgiveCall{r, cln, zone, subject, {}};

    if (cln == nullptr || call == nullptr || worker.forgive == nullptr) {
        delete call;
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (!worker.forgive->forgive(view(key), answered, call)) {
        delete call;
        return send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                          "redis unavailable");
    }

    cln->handler = request_gone;
    cln->data = call;
    init_event(&call->ev, on_forgive_event, call, r->connection->log);
    ngx_add_timer(&call->ev, main_conf(r)->redis->timeout);

    // This worker's memory at once; the others' as the message comes.
    worker.denied->forget(view(key));
    r->main->count++;
    return NGX_DONE;
}

}  // namespace

ngx_int_t query_or_forgive_handler(ngx_http_request_t *r) noexcept
{
    return r->method == NGX_HTTP_DELETE ? forgive(r) : query_handler(r);
}

}  // namespace ratelimit
