#include "rate/zone_limit.hpp"

#include "worker/worker_objects.hpp"

namespace ratelimit {

namespace {

// The bytes of a value shown in its log line.
constexpr size_t kMaxShownValue = 64;

}  // namespace

LimitFound find_limit(ngx_http_request_t *r, const Zone &zone,
                      const char *outcome, std::uint64_t *limit) noexcept
{
    if (zone.limit_value == nullptr) {
        *limit = zone.policy.limit;
        return LimitFound::kLimit;
    }

    ngx_str_t value;

    if (ngx_http_complex_value(r, zone.limit_value, &value) != NGX_OK) {
        return LimitFound::kError;
    }

    // As an empty key: the zone does not limit the request.
    if (value.len == 0) {
        return LimitFound::kNone;
    }

    auto found = limit_from_value(view(value), zone.limit_is_rate,
                                  zone.policy.window_ms);

    if (found) {
        *limit = *found;
        return LimitFound::kLimit;
    }

    // A value that is no limit comes from the configuration (a map's
    // entry), so every request that meets it would log it: one line a
    // second tells.
    if (worker_objects().value_log.allow()) {
        char text[printable_size(kMaxShownValue)];
        size_t len = write_printable(view(value), kMaxShownValue, text);

        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "ratelimit: invalid %s \"%*s\" for zone \"%V\", %s",
                      zone.limit_is_rate ? "rate" : "limit", len, text,
                      &zone.name, outcome);
    }

    return LimitFound::kInvalid;
}

}  // namespace ratelimit
