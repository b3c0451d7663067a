#include "status/forgive_handler.hpp"

#include "keys/subject_key.hpp"
#include "rate/forgive_listener.hpp"
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
    ngx_str_t subject;
    ngx_int_t rc;
    const Zone *zone = start_write(r, &subject, &rc);

    if (zone == nullptr) {
        return rc;
    }

    StatusWrite *write = new_write(r, zone, subject, forgiven,
                                   "redis timed out: the key may or may not "
                                   "be forgiven, try again");
    // A zone with ban=: its subject's ban is lifted too.
    ngx_str_t side = ngx_null_string, marker = ngx_null_string;

    if (write == nullptr
        || (zone->ban_ms > 0
            && !side_keys(r, *zone, write->key, &side, &marker)))
    {
        delete write;
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    bool sent = worker_objects().forgive->forgive(view(write->key),
                                                  view(side), view(marker),
                                                  write_answered, write);
    return await_write(r, write, sent);
}

}  // namespace ratelimit
