#include "status/override_handler.hpp"

#include <optional>

#include "keys/subject_key.hpp"
#include "limits/algorithms.hpp"
#include "metrics/metrics.hpp"
#include "params/override_params.hpp"
#include "rate/forgive_listener.hpp"
#include "redis/redis_link.hpp"
#include "request/request_state.hpp"
#include "status/status_handler.hpp"
#include "status/status_write.hpp"
#include "worker/worker_objects.hpp"

namespace ratelimit {

namespace {

std::optional<std::string_view> arg(ngx_http_request_t *r, const char *name)
{
    ngx_str_t value;

    if (ngx_http_arg(r, (u_char *) name, ngx_strlen(name), &value)
        != NGX_OK)
    {
        return std::nullopt;
    }

    return view(value);
}

// "limit 1000 for 86400 s", "rate 10r/m until removed", "override removed".
u_char *write_change(u_char *p, u_char *last, const Zone &zone,
                     const OverrideChange &change)
{
    if (change.remove) {
        return ngx_slprintf(p, last, "override removed");
    }

    p = row_of(zone.policy).takes_turns
        ? ngx_slprintf(p, last, "rate %uLr/%c", change.limit,
                       rate_unit(change.window_ms))
        : ngx_slprintf(p, last, "limit %uL", change.limit);

    return change.ttl_ms > 0
           ? ngx_slprintf(p, last, " for %uL s", change.ttl_ms / 1000)
           : ngx_slprintf(p, last, " until removed");
}

ngx_int_t changed(ngx_http_request_t *r, const StatusWrite &write)
{
    char subject[printable_subject_max_size()];
    size_t len = write_printable_subject(view(write.subject), subject);
    u_char change[96];
    u_char *end = write_change(change, change + sizeof(change), *write.zone,
                               write.change);
    u_char was[NGX_INT64_LEN + 1];
    u_char *was_end = write.was < 0
                      ? ngx_cpymem(was, "none", 4)
                      : ngx_sprintf(was, "%L", write.was);

    ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0,
                  "ratelimit: zone \"%V\", key \"%*s\" %*s (was %*s) by "
                  "%V, %L workers told", &write.zone->name, len, subject,
                  end - change, change, was_end - was, was,
                  &r->connection->addr_text, write.told);
    metrics::record_override_change(write.zone->index,
                                    write.change.remove
                                    ? OverrideChangeKind::kRemoved
                                    : OverrideChangeKind::kSet);
    return NGX_HTTP_NO_CONTENT;
}

}  // namespace

ngx_int_t override_handler(ngx_http_request_t *r) noexcept
{
    ngx_str_t subject, side, marker;
    ngx_int_t rc;
    const Zone *zone = start_write(r, &subject, &rc);

    if (zone == nullptr) {
        return rc;
    }

    Policy policy = zone->policy;
    policy.burst = zone->largest_burst;
    const char *error = nullptr;
    std::optional<OverrideChange> change = parse_override(
        policy, {arg(r, "limit"), arg(r, "rate"), arg(r, "ttl")}, &error);

    if (!change) {
        return send_error(r, NGX_HTTP_BAD_REQUEST, error);
    }

    StatusWrite *write = new_write(r, zone, subject, changed,
                                   "redis timed out: the limit may or may "
                                   "not be changed, try again");

    if (write == nullptr || !side_keys(r, *zone, write->key, &side, &marker)) {
        delete write;
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    write->change = *change;
    bool sent = worker_objects().forgive->set_override(
        view(write->key), view(side), view(marker), *change, write_answered,
        write);
    return await_write(r, write, sent);
}

}  // namespace ratelimit
