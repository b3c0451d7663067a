#include "rate/zone_values.hpp"

#include "worker/worker_objects.hpp"

namespace ratelimit {

namespace {

// A value that is none comes from the configuration (a map's entry, an
// upstream's header), so every request that meets it would log it: one
// line a second tells.
void log_invalid(ngx_http_request_t *r, const char *what,
                 const ngx_str_t &value, const ngx_str_t &zone,
                 const char *outcome)
{
    if (!worker_objects().value_log.allow()) {
        return;
    }

    LoggedText text(view(value), Quoted::kYes);
    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "ratelimit: invalid %s \"%V\" for zone \"%V\", %s", what,
                  text.str(), &zone, outcome);
}

ValueFound evaluate(ngx_http_request_t *r, ngx_http_complex_value_t *compiled,
                    ngx_str_t *value)
{
    if (ngx_http_complex_value(r, compiled, value) != NGX_OK) {
        return ValueFound::kError;
    }

    return value->len == 0 ? ValueFound::kEmpty : ValueFound::kFound;
}

// A whole number of units from 0 to 2^53, `what` in the zone `zone`.  An
// empty value is kEmpty, or with `empty_invalid` none.
ValueFound find_units(ngx_http_request_t *r, ngx_http_complex_value_t *compiled,
                      const char *what, const ngx_str_t &zone,
                      const char *outcome, bool empty_invalid,
                      std::uint64_t *units)
{
    ngx_str_t value;
    ValueFound found = evaluate(r, compiled, &value);

    if (found == ValueFound::kError
        || (found == ValueFound::kEmpty && !empty_invalid))
    {
        return found;
    }

    auto parsed = parse_units(view(value));

    if (parsed) {
        *units = *parsed;
        return ValueFound::kFound;
    }

    log_invalid(r, what, value, zone, outcome);
    return ValueFound::kInvalid;
}

}  // namespace

ValueFound find_limit(ngx_http_request_t *r, const Zone &zone,
                      const char *outcome, std::uint64_t *limit) noexcept
{
    if (zone.limit_value == nullptr) {
        *limit = zone.policy.limit;
        return ValueFound::kFound;
    }

    ngx_str_t value;
    ValueFound found = evaluate(r, zone.limit_value, &value);

    if (found != ValueFound::kFound) {
        return found;
    }

    auto parsed = limit_from_value(view(value), zone.limit_is_rate,
                                   zone.policy.window_ms);

    if (parsed) {
        *limit = *parsed;
        return ValueFound::kFound;
    }

    if (blocks_all(view(value), zone.limit_is_rate)) {
        *limit = 0;
        return ValueFound::kBlocked;
    }

    log_invalid(r, zone.limit_is_rate ? "rate" : "limit", value, zone.name,
                outcome);
    return ValueFound::kInvalid;
}

ValueFound find_cost(ngx_http_request_t *r, const ZoneRef &ref,
                     const char *outcome, std::uint64_t *cost) noexcept
{
    if (ref.cost_value == nullptr) {
        *cost = ref.cost;
        return ValueFound::kFound;
    }

    // An empty cost is none: the request cannot be decided.
    return find_units(r, ref.cost_value, "cost", ref.zone->name, outcome,
                      true, cost);
}

ValueFound find_settled_units(ngx_http_request_t *r, const SettleRef &settle,
                              std::uint64_t *units) noexcept
{
    return find_units(r, const_cast<ngx_http_complex_value_t *>(&settle.value),
                      "settle value", settle.zone->name, "nothing settled",
                      false, units);
}

}  // namespace ratelimit
