#include "status/forgive_handler.hpp"

#include "keys/subject_key.hpp"
#include "limits/deny_cache.hpp"
#include "rate/forgive_listener.hpp"
#include "request/request_state.hpp"
#include "status/status_handler.hpp"
#include "status/status_write.hpp"
#include "worker/worker_objects.hpp"

namespace ratelimit {

namespace {

ngx_int_t forgiven(ngx_http_request_t *r, const StatusWrite &write)
{
    char subject[printable_subject_max_size()];
    size_t len = write_printable_subject(view(write.subject), subject);

    ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0,
                  "ratelimit: zone \"%V\", key \"%*s\" forgiven, %L "
                  "workers told", &write.zone->name, len, subject,
                  write.told);
    return NGX_HTTP_NO_CONTENT;
}

}  // namespace

ngx_int_t forgive_handler(ngx_http_request_t *r) noexcept
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

    WorkerObjects &worker = worker_objects();
    StatusWrite *write = make_subject_key(r, *zone, subject, &key)
                         && worker.forgive != nullptr
                         ? new_write(r, zone, subject) : nullptr;

    if (write == nullptr) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    write->done = forgiven;
    write->unsure = "redis timed out: the key may or may not be forgiven, "
                    "try again";

    bool sent = worker.forgive->forgive(view(key), write_answered, write);

    // This worker's memory at once; the others' as the message comes.
    if (sent) {
        worker.denied->forget(view(key));
    }

    return await_write(r, write, sent);
}

}  // namespace ratelimit
