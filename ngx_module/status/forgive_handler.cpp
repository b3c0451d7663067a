#include "status/forgive_handler.hpp"

#include <new>

#include "keys/subject_key.hpp"
#include "limits/deny_cache.hpp"
#include "rate/forgive_listener.hpp"
#include "request/request_state.hpp"
#include "status/status_handler.hpp"
#include "worker/worker_objects.hpp"

namespace ratelimit {

namespace {

// One DELETE waiting for Redis.  Redis answers every call, or the link
// hands it nullptr, so the record outlives a request that was terminated
// meanwhile: the request's pool cleanup clears `r`, and the answer
// disarms the cleanup before the record goes.
struct ForgiveCall {
    ngx_http_request_t *r;   // nullptr once the request is gone
    ngx_pool_cleanup_t *cln;
    const Zone *zone;
    ngx_str_t subject;       // in r's pool: read only while r lives
};

void request_gone(void *data) noexcept
{
    static_cast<ForgiveCall *>(data)->r = nullptr;
}

void log_forgiven(const ForgiveCall *call, long long told)
{
    char subject[printable_subject_max_size()];
    size_t len = write_printable_subject(view(call->subject), subject);

    ngx_log_error(NGX_LOG_NOTICE, call->r->connection->log, 0,
                  "ratelimit: zone \"%V\", key \"%*s\" forgiven, %L "
                  "workers told", &call->zone->name, len, subject, told);
}

// The reply of the EVAL that deleted the key and published the forgiving:
// the number of subscribers the message reached.
void answered(void *data, const Reply *reply) noexcept
{
    auto *call = static_cast<ForgiveCall *>(data);
    ngx_http_request_t *r = call->r;

    if (r != nullptr) {
        call->cln->handler = nullptr;

        if (reply != nullptr && reply->type == Reply::Type::kInteger) {
            log_forgiven(call, reply->integer);
            ngx_http_finalize_request(r, NGX_HTTP_NO_CONTENT);
        } else {
            ngx_http_finalize_request(
                r, send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                              "redis unavailable"));
        }
    }

    delete call;
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
    auto *call = new (std::nothrow) ForgiveCall{r, cln, zone, subject};

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
