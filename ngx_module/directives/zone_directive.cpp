#include "directives/zone_directive.hpp"

#include <new>

#include "directives/conf_params.hpp"
#include "directives/time_zone_file.hpp"
#include "directives/zone_changes.hpp"
#include "directives/zone_warnings.hpp"
#include "leases/lease_table.hpp"
#include "limits/algorithms.hpp"
#include "limits/rate_headers.hpp"
#include "params/zone_params.hpp"
#include "scripts/script_batch.hpp"

namespace ratelimit {

// The zone called `name`, if one is defined yet.
Zone *find_zone(MainConf *mcf, const ngx_str_t &name) noexcept
{
    auto **zones = static_cast<Zone **>(mcf->zones.elts);

    for (ngx_uint_t i = 0; i < mcf->zones.nelts; i++) {
        if (zones[i]->name.len == name.len
            && ngx_strncmp(zones[i]->name.data, name.data, name.len) == 0)
        {
            return zones[i];
        }
    }

    return nullptr;
}

namespace {

// The zone's request-independent script arguments and header text.
bool render_zone(ngx_pool_t *pool, Zone *zone)
{
    const Policy &p = zone->policy;

    zone->script_args.data = static_cast<u_char *>(
        ngx_pnalloc(pool, kZoneArgsMaxSize));

    if (zone->script_args.data == nullptr) {
        return false;
    }

    zone->script_args.len = write_zone_args(
        p, reinterpret_cast<char *>(zone->script_args.data));

    std::string_view name = view(zone->name);
    auto *member = static_cast<u_char *>(
        ngx_pnalloc(pool, policy_member_max_size(name)));

    if (member == nullptr) {
        return false;
    }

    zone->policy_member.data = member;
    // The window of a zone whose arguments are the same for every call is
    // the same at any time.
    zone->policy_member.len = write_policy_member(
        name, row_of(p).quota(p), row_of(p).window_s(p, 0),
        reinterpret_cast<char *>(member));
    return true;
}

// The policy read into the zone: a rate zone's, with its script arguments
// and header text, or a concurrency zone's.
bool set_zone_policy(ngx_pool_t *pool, const ZoneParams &params, Zone *zone)
{
    if (params.kind == ZoneKind::kRate) {
        zone->policy = params.policy;
        // A GCRA zone's burst is its location's, a calendar zone's periods
        // follow the clock: their arguments and header member are made per
        // call, as a variable limit's.
        return !params.limit_variable.empty()
               || row_of(params.policy).args_per_call
               || render_zone(pool, zone);
    }

    auto *policy = static_cast<ConcurrencyPolicy *>(
        ngx_palloc(pool, sizeof(ConcurrencyPolicy)));

    if (policy == nullptr) {
        return false;
    }

    *policy = params.concurrency;
    zone->concurrency = policy;
    return true;
}

// `limit=$NAME` or `rate=$NAME`, evaluated per request.
bool compile_limit(ngx_conf_t *cf, const ZoneParams &params, Zone *zone)
{
    if (params.limit_variable.empty()) {
        return true;
    }

    zone->limit_value = static_cast<ngx_http_complex_value_t *>(
        ngx_palloc(cf->pool, sizeof(ngx_http_complex_value_t)));

    if (zone->limit_value == nullptr) {
        return false;
    }

    zone->limit_is_rate = params.limit_is_rate;
    ngx_str_t text = arg_string(params.limit_variable);
    return compile_value(cf, &text, zone->limit_value);
}

// A zone as parse_zone_params() read it, into the configuration.  Its
// name is checked against the zones defined before it, as the first token,
// before the parser's errors on the later tokens.
char *add_zone(ngx_conf_t *cf, MainConf *mcf,
               const ParamResult<ZoneParams> &parsed)
{
    const ngx_str_t &name = static_cast<ngx_str_t *>(cf->args->elts)[1];

    if (parsed.error && parsed.error->token == 0) {
        return param_error(cf, *parsed.error);
    }

    if (find_zone(mcf, name) != nullptr) {
        return directive_error(cf, "ratelimit_zone \"%V\" is duplicate",
                               &name);
    }

    if (parsed.error) {
        return param_error(cf, *parsed.error);
    }

    auto *zone = static_cast<Zone *>(ngx_pcalloc(cf->pool, sizeof(Zone)));

    if (zone == nullptr) {
        return nginx_logged_error();
    }

    zone->name = name;
    zone->index = mcf->zones.nelts;

    if (!set_zone_policy(cf->pool, parsed.params, zone)) {
        return nginx_logged_error();
    }

    if (parsed.params.policy.algorithm == Algorithm::kCalendar) {
        if (char *rv = add_calendar(cf, parsed.params, zone)) {
            return rv;
        }
    }

    zone->ban_ms = parsed.params.ban_ms;
    zone->top = parsed.params.kind == ZoneKind::kRate ? parsed.params.top
                                                      : 0;
    ngx_str_t key = arg_string(parsed.params.key);

    if (!compile_value(cf, &key, &zone->key)
        || !compile_limit(cf, parsed.params, zone))
    {
        return nginx_logged_error();
    }

    if (parsed.params.lease_bytes > 0) {
        if (add_lease_table(cf, zone, parsed.params.lease_bytes) != NGX_OK) {
            return nginx_logged_error();
        }

        // A lease's share needs the live servers, which the server learns
        // as `ratelimit_fail local` does.
        mcf->local = true;
    }

    auto **slot = static_cast<Zone **>(ngx_array_push(&mcf->zones));

    if (slot == nullptr) {
        return nginx_logged_error();
    }

    *slot = zone;
    warn_zone(cf, parsed.params);
    warn_zone_change(cf, *zone);
    return NGX_CONF_OK;
}

}  // namespace

// ratelimit_zone, of either kind: the kind follows from the parameters.
char *set_zone(ngx_conf_t *cf, ngx_command_t *, void *conf) noexcept
{
    try {
        return add_zone(cf, static_cast<MainConf *>(conf),
                        parse_zone_params(directive_tokens(cf)));
    } catch (const std::bad_alloc &) {
        return directive_error(cf, "out of memory");
    }
}

}  // namespace ratelimit
