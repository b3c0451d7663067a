#include "directives/concurrency_zone.hpp"

#include "directives/conf_params.hpp"

namespace ratelimit {

namespace {

// Unless configured: a waiter gives up after 10 s, and the slots of a
// server that died come back within 10 s.
constexpr ngx_msec_t kDefaultQueueTimeout = 10000;
constexpr ngx_msec_t kDefaultLease = 10000;

// A lease is renewed every third of it: shorter ones would renew too often
// to be worth having.
constexpr ngx_msec_t kMinLease = 300;

bool parse_queue_length(const ngx_str_t &text, std::uint64_t *out)
{
    if (text.len == 1 && text.data[0] == '0') {
        *out = 0;
        return true;
    }

    auto count = parse_count(view(text));

    if (!count) {
        return false;
    }

    *out = *count;
    return true;
}

}  // namespace

bool is_concurrency_zone(ngx_conf_t *cf) noexcept
{
    auto *args = static_cast<ngx_str_t *>(cf->args->elts);
    ngx_str_t value;

    for (ngx_uint_t i = 2; i < cf->args->nelts; i++) {
        if (take_param(args[i], "concurrency=", &value)) {
            return true;
        }
    }

    return false;
}

char *parse_concurrency_zone(ngx_conf_t *cf, Zone *zone,
                             ngx_str_t *key) noexcept
{
    auto *args = static_cast<ngx_str_t *>(cf->args->elts);
    ngx_str_t limit = ngx_null_string, queue = ngx_null_string,
              timeout = ngx_null_string, lease = ngx_null_string;

    for (ngx_uint_t i = 2; i < cf->args->nelts; i++) {
        ngx_str_t value, *slot;

        if (take_param(args[i], "key=", &value)) {
            slot = key;
        } else if (take_param(args[i], "concurrency=", &value)) {
            slot = &limit;
        } else if (take_param(args[i], "queue=", &value)) {
            slot = &queue;
        } else if (take_param(args[i], "queue_timeout=", &value)) {
            slot = &timeout;
        } else if (take_param(args[i], "lease=", &value)) {
            slot = &lease;
        } else {
            return invalid_param(cf, args[i]);
        }

        if (slot->data != nullptr) {
            return duplicate_param(cf, args[i]);
        }

        *slot = value;
    }

    auto *policy = static_cast<ConcurrencyPolicy *>(
        ngx_pcalloc(cf->pool, sizeof(ConcurrencyPolicy)));

    if (policy == nullptr) {
        return conf_error();
    }

    auto count = parse_count(view(limit));
    ngx_msec_t timeout_ms = kDefaultQueueTimeout, lease_ms = kDefaultLease;

    if (!count) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid concurrency \"%V\"", &limit);
        return conf_error();
    }

    if (queue.data != nullptr
        && !parse_queue_length(queue, &policy->queue))
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid queue \"%V\"",
                           &queue);
        return conf_error();
    }

    if (timeout.data != nullptr && !parse_msec(timeout, &timeout_ms)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid queue_timeout \"%V\"", &timeout);
        return conf_error();
    }

    if (lease.data != nullptr
        && (!parse_msec(lease, &lease_ms) || lease_ms < kMinLease))
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid lease \"%V\": at least %M ms", &lease,
                           kMinLease);
        return conf_error();
    }

    policy->limit = *count;
    policy->queue_timeout_ms = timeout_ms;
    policy->lease_ms = lease_ms;
    zone->concurrency = policy;
    return NGX_CONF_OK;
}

bool check_concurrency_refs(ngx_conf_t *cf, ngx_array_t *refs) noexcept
{
    auto *ref = static_cast<ZoneRef *>(refs->elts);
    const ZoneRef *first = nullptr;

    for (ngx_uint_t i = 0; i < refs->nelts; i++) {
        if (ref[i].zone->concurrency == nullptr) {
            continue;
        }

        if (first != nullptr) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "concurrency zone \"%V\" in %V:%ui: a location "
                          "takes one concurrency zone, and has \"%V\"",
                          &ref[i].name, &ref[i].file, ref[i].line,
                          &first->name);
            return false;
        }

        first = &ref[i];
    }

    return true;
}

}  // namespace ratelimit
