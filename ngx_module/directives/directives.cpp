#include "directives/directives.hpp"

#include <algorithm>
#include <new>

#include "directives/concurrency_zone.hpp"
#include "directives/conf_params.hpp"
#include "directives/conf_places.hpp"
#include "directives/fail_directive.hpp"
#include "status/metrics_handler.hpp"
#include "limits/algorithms.hpp"
#include "limits/gcra.hpp"
#include "limits/rate_headers.hpp"
#include "limits/window_rules.hpp"
#include "directives/redis_directives.hpp"
#include "directives/settle_directive.hpp"
#include "directives/zone_changes.hpp"
#include "directives/zone_warnings.hpp"
#include "leases/lease_table.hpp"
#include "params/zone_params.hpp"
#include "scripts/script_batch.hpp"
#include "status/forgive_handler.hpp"
#include "status/status_handler.hpp"

namespace ratelimit {

namespace {

char *set_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept;
char *set_ratelimit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept;
char *set_query(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept;
char *set_metrics(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept;

// Unlike ngx_conf_check_num_bounds, names the directive, as nginx does
// with a message a handler returns.
char *check_status(ngx_conf_t *cf, void *post, void *data) noexcept
{
    auto status = *static_cast<ngx_uint_t *>(data);

    if (status < 400 || status > 599) {
        return directive_error(cf, "\"%V\" directive must be between 400 "
                                   "and 599",
                               static_cast<ngx_str_t *>(cf->args->elts));
    }

    return NGX_CONF_OK;
}

ngx_conf_post_t status_bounds = {check_status};

ngx_conf_enum_t log_levels[] = {
    {ngx_string("info"), NGX_LOG_INFO},
    {ngx_string("notice"), NGX_LOG_NOTICE},
    {ngx_string("warn"), NGX_LOG_WARN},
    {ngx_string("error"), NGX_LOG_ERR},
    {ngx_null_string, 0},
};

// The zone called `name`, if one is defined yet.
Zone *find_zone(MainConf *mcf, const ngx_str_t &name)
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
    zone->policy_member.len = write_policy_member(
        name, row_of(p).quota(p), row_of(p).window_s(p),
        reinterpret_cast<char *>(member));
    return true;
}

// The policy read into the zone: a rate zone's, with its script arguments
// and header text, or a concurrency zone's.
bool set_zone_policy(ngx_pool_t *pool, const ZoneParams &params, Zone *zone)
{
    if (params.kind == ZoneKind::kRate) {
        zone->policy = params.policy;
        // A zone that takes burst= has it from its location (GCRA's): its
        // arguments and header member are made per request, as a variable
        // limit's.
        return !params.limit_variable.empty()
               || row_of(params.policy).accepts_burst
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

// Adds `zone=NAME` to a location's list of zones (`ratelimit` or
// `ratelimit_query`); the zone itself is looked up in resolve_zones().
char *push_zone_ref(ngx_conf_t *cf, ngx_array_t **list, const ngx_str_t &name,
                    bool dry_run, bool query)
{
    if (*list == NGX_CONF_UNSET_PTR || *list == nullptr) {
        *list = ngx_array_create(cf->pool, 2, sizeof(ZoneRef));
        if (*list == nullptr) {
            return nginx_logged_error();
        }
    }

    auto *refs = static_cast<ZoneRef *>((*list)->elts);

    for (ngx_uint_t i = 0; i < (*list)->nelts; i++) {
        if (refs[i].name.len == name.len
            && ngx_strncmp(refs[i].name.data, name.data, name.len) == 0)
        {
            return directive_error(cf, "zone \"%V\" is duplicate", &name);
        }
    }

    if ((*list)->nelts == kMaxZonesPerRequest) {
        return directive_error(cf, "too many ratelimit zones, at most %uz",
                               kMaxZonesPerRequest);
    }

    auto *ref = static_cast<ZoneRef *>(ngx_array_push(*list));

    if (ref == nullptr) {
        return nginx_logged_error();
    }

    ref->name = name;
    ref->zone = nullptr;
    ref->dry_run = dry_run;
    ref->cost = 1;
    ref->cost_value = nullptr;
    ref->burst = 0;
    ref->delay = 0;
    ref->shaping = false;
    ref->query = query;
    ref->file = cf->conf_file->file.name;
    ref->line = cf->conf_file->line;
    return NGX_CONF_OK;
}

// `cost=N` or `cost=$NAME` of the ref just pushed.
char *set_ref_cost(ngx_conf_t *cf, ngx_str_t value, ZoneRef *ref)
{
    if (ngx_http_script_variables_count(&value) == 0) {
        auto cost = parse_units(view(value));

        if (!cost) {
            return directive_error(cf, "invalid cost \"%V\": a whole number "
                                       "from 0 to 2^53, or a variable",
                                   &value);
        }

        ref->cost = *cost;
        return NGX_CONF_OK;
    }

    ref->cost_value = static_cast<ngx_http_complex_value_t *>(
        ngx_palloc(cf->pool, sizeof(ngx_http_complex_value_t)));

    if (ref->cost_value == nullptr || !compile_value(cf, &value,
                                                     ref->cost_value))
    {
        return nginx_logged_error();
    }

    return NGX_CONF_OK;
}

// `burst=N`, `delay=N` or `nodelay` of a GCRA zone into *shaping (burst
// and delay, ZoneRef's), once each; false if `arg` is none of them.
// `delay=` and `nodelay` exclude each other, as in limit_req.
bool take_shaping(ngx_conf_t *cf, const ngx_str_t &arg,
                  std::uint64_t (&shaping)[2], bool (&given)[2], char **rv)
{
    ngx_str_t value;
    std::size_t which = 1;
    std::optional<std::uint64_t> number = kNoDelay;

    if (take_param(arg, "burst=", &value)) {
        which = 0;
        number = parse_units(view(value));
    } else if (take_param(arg, "delay=", &value)) {
        number = parse_units(view(value));
    } else if (view(arg) != "nodelay") {
        return false;
    }

    if (given[which]) {
        *rv = duplicate_param(cf, arg);
    } else if (!number) {
        *rv = invalid_param(cf, arg);
    } else {
        shaping[which] = *number;
        given[which] = true;
    }

    return true;
}

char *set_ratelimit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept
{
    auto *lcf = static_cast<LocConf *>(conf);
    auto *args = static_cast<ngx_str_t *>(cf->args->elts);
    ngx_str_t name = ngx_null_string;
    ngx_str_t cost = ngx_null_string;
    bool dry_run = false;
    std::uint64_t shaping[2] = {0, 0};  // burst, delay
    bool given[2] = {false, false};

    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        ngx_str_t value;

        if (args[i].len >= 5 && ngx_strncmp(args[i].data, "zone=", 5) == 0) {
            char *rv = take_zone_name(cf, args[i], &name);

            if (rv != NGX_CONF_OK) {
                return rv;
            }

        } else if (take_param(args[i], "cost=", &value)) {
            if (cost.data != nullptr) {
                return duplicate_param(cf, args[i]);
            }
            if (value.len == 0) {
                return invalid_param(cf, args[i]);
            }
            cost = value;

        } else if (args[i].len == 7
                   && ngx_strncmp(args[i].data, "dry_run", 7) == 0)
        {
            dry_run = true;

        } else {
            char *rv = NGX_CONF_OK;

            if (!take_shaping(cf, args[i], shaping, given, &rv)) {
                return invalid_param(cf, args[i]);
            }

            if (rv != NGX_CONF_OK) {
                return rv;
            }
        }
    }

    if (name.data == nullptr) {
        return directive_error(cf, "\"%V\" must have \"zone=\" parameter",
                               &args[0]);
    }

    char *rv = push_zone_ref(cf, &lcf->zones, name, dry_run, false);

    if (rv != NGX_CONF_OK) {
        return rv;
    }

    ZoneRef &ref = static_cast<ZoneRef *>(lcf->zones->elts)[
        lcf->zones->nelts - 1];
    ref.burst = shaping[0];
    ref.delay = shaping[1];
    ref.shaping = given[0] || given[1];
    return cost.data == nullptr ? NGX_CONF_OK : set_ref_cost(cf, cost, &ref);
}

char *set_query(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept
{
    auto *lcf = static_cast<LocConf *>(conf);
    auto *args = static_cast<ngx_str_t *>(cf->args->elts);

    if (lcf->query != nullptr) {
        return duplicate_directive(cf);
    }

    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        ngx_str_t name;

        if (take_param(args[i], "delete=", &name)) {
            if (view(name) != "on" && view(name) != "off") {
                return invalid_param(cf, args[i]);
            }

            lcf->query_delete = view(name) == "on";
            continue;
        }

        if (!take_param(args[i], "zone=", &name) || name.len == 0) {
            return invalid_param(cf, args[i]);
        }

        char *rv = push_zone_ref(cf, &lcf->query, name, false, true);

        if (rv != NGX_CONF_OK) {
            return rv;
        }
    }

    if (lcf->query == nullptr) {
        return directive_error(cf, "\"%V\" needs a zone=NAME",
                               &cmd->name);
    }

    if (lcf->query_delete) {
        static_cast<MainConf *>(ngx_http_conf_get_module_main_conf(
            cf, ngx_http_ratelimit_module))->forgive = true;
    }

    auto *clcf = static_cast<ngx_http_core_loc_conf_t *>(
        ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module));
    clcf->handler = lcf->query_delete ? query_or_forgive_handler
                                      : query_handler;
    return NGX_CONF_OK;
}

char *set_metrics(ngx_conf_t *cf, ngx_command_t *, void *conf) noexcept
{
    auto *lcf = static_cast<LocConf *>(conf);

    if (lcf->metrics) {
        return duplicate_directive(cf);
    }

    lcf->metrics = true;

    auto *mcf = static_cast<MainConf *>(
        ngx_http_conf_get_module_main_conf(cf, ngx_http_ratelimit_module));
    mcf->metrics = true;

    auto *clcf = static_cast<ngx_http_core_loc_conf_t *>(
        ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module));
    clcf->handler = metrics_handler;
    return NGX_CONF_OK;
}

// Binds each `ratelimit zone=NAME` to its zone, once the whole http block
// (and so every ratelimit_zone) has been read.
char *resolve_zones(ngx_conf_t *cf, MainConf *mcf, ngx_array_t *refs_array)
{
    auto *refs = static_cast<ZoneRef *>(refs_array->elts);

    for (ngx_uint_t i = 0; i < refs_array->nelts; i++) {
        ZoneRef &ref = refs[i];

        ref.zone = find_zone(mcf, ref.name);

        if (ref.zone == nullptr) {
            return after_block_error(cf, "unknown ratelimit zone \"%V\" in "
                                         "%V:%ui",
                                     &ref.name, &ref.file, ref.line);
        }

        if (mcf->redis == nullptr) {
            return after_block_error(cf, "ratelimit zone \"%V\" needs "
                                         "\"ratelimit_redis\" in the http "
                                         "block, in %V:%ui",
                                     &ref.name, &ref.file, ref.line);
        }

        // The script takes a window of 1 + burst emission intervals of at
        // most kMaxWindowMs, as it takes a window of buckets.
        const Policy &policy = ref.zone->policy;
        const AlgorithmRow &row = row_of(policy);

        if (row.accepts_burst
            && ref.burst >= window_rules::kMaxWindowMs / policy.window_ms)
        {
            return after_block_error(cf, "burst=%uL is too large for zone "
                                         "\"%V\", in %V:%ui",
                                     ref.burst, &ref.name, &ref.file,
                                     ref.line);
        }

        if (ref.shaping && !row.accepts_burst) {
            return after_block_error(cf, "\"burst=\", \"delay=\" and "
                                         "\"nodelay\" apply to zones of "
                                         "algorithm=gcra only, not \"%V\", "
                                         "in %V:%ui",
                                     &ref.name, &ref.file, ref.line);
        }

        ref.zone->largest_burst = std::max(ref.zone->largest_burst,
                                           ref.query ? 0 : ref.burst);
        mcf->used = true;
        mcf->concurrency |= ref.zone->concurrency != nullptr;
    }

    return NGX_CONF_OK;
}

}  // namespace

ngx_command_t commands[] = {
    {ngx_string("ratelimit_redis"),
     NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE,
     set_redis,
     NGX_HTTP_MAIN_CONF_OFFSET,
     0,
     nullptr},

    {ngx_string("ratelimit_redis_ssl"),
     NGX_HTTP_MAIN_CONF | NGX_CONF_FLAG,
     ngx_conf_set_flag_slot,
     NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(MainConf, tls.enable),
     nullptr},

    {ngx_string("ratelimit_redis_ssl_verify"),
     NGX_HTTP_MAIN_CONF | NGX_CONF_FLAG,
     placed_slot<ngx_conf_set_flag_slot>,
     NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(MainConf, tls.verify),
     nullptr},

    {ngx_string("ratelimit_redis_ssl_verify_depth"),
     NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     placed_slot<ngx_conf_set_num_slot>,
     NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(MainConf, tls.verify_depth),
     nullptr},

    {ngx_string("ratelimit_redis_ssl_name"),
     NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     placed_slot<ngx_conf_set_str_slot>,
     NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(MainConf, tls.name),
     nullptr},

    {ngx_string("ratelimit_redis_ssl_server_name"),
     NGX_HTTP_MAIN_CONF | NGX_CONF_FLAG,
     placed_slot<ngx_conf_set_flag_slot>,
     NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(MainConf, tls.server_name),
     nullptr},

    {ngx_string("ratelimit_redis_ssl_trusted_certificate"),
     NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     placed_slot<set_tls_file>,
     NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(MainConf, tls.trusted_certificate),
     nullptr},

    {ngx_string("ratelimit_redis_ssl_certificate"),
     NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     placed_slot<set_tls_file>,
     NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(MainConf, tls.certificate),
     nullptr},

    {ngx_string("ratelimit_redis_ssl_certificate_key"),
     NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     placed_slot<set_tls_file>,
     NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(MainConf, tls.certificate_key),
     nullptr},

    {ngx_string("ratelimit_redis_ssl_protocols"),
     NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE,
     placed_slot<ngx_conf_set_bitmask_slot>,
     NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(MainConf, tls.protocols),
     tls_protocols},

    {ngx_string("ratelimit_redis_ssl_ciphers"),
     NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     placed_slot<ngx_conf_set_str_slot>,
     NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(MainConf, tls.ciphers),
     nullptr},

    {ngx_string("ratelimit_zone"),
     NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE,
     set_zone,
     NGX_HTTP_MAIN_CONF_OFFSET,
     0,
     nullptr},

    {ngx_string("ratelimit_prefix"),
     NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     placed_slot<ngx_conf_set_str_slot>,
     NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(MainConf, prefix),
     nullptr},

    {ngx_string("ratelimit"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_1MORE,
     set_ratelimit,
     NGX_HTTP_LOC_CONF_OFFSET,
     0,
     nullptr},

    {ngx_string("ratelimit_settle"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_2MORE,
     set_settle,
     NGX_HTTP_LOC_CONF_OFFSET,
     0,
     nullptr},

    {ngx_string("ratelimit_query"),
     NGX_HTTP_LOC_CONF | NGX_CONF_1MORE,
     set_query,
     NGX_HTTP_LOC_CONF_OFFSET,
     0,
     nullptr},

    {ngx_string("ratelimit_metrics"),
     NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
     set_metrics,
     NGX_HTTP_LOC_CONF_OFFSET,
     0,
     nullptr},

    {ngx_string("ratelimit_peek_header"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_TAKE1,
     ngx_conf_set_str_slot,
     NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(LocConf, peek_header),
     nullptr},

    {ngx_string("ratelimit_status"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_TAKE1,
     ngx_conf_set_num_slot,
     NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(LocConf, status),
     &status_bounds},

    {ngx_string("ratelimit_headers"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_FLAG,
     ngx_conf_set_flag_slot,
     NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(LocConf, headers),
     nullptr},

    {ngx_string("ratelimit_fail"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_TAKE12,
     set_fail,
     NGX_HTTP_LOC_CONF_OFFSET,
     0,
     nullptr},

    {ngx_string("ratelimit_local_memory"),
     NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     ngx_conf_set_size_slot,
     NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(MainConf, local_memory),
     &local_memory_bounds},

    {ngx_string("ratelimit_dry_run"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_FLAG,
     ngx_conf_set_flag_slot,
     NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(LocConf, dry_run),
     nullptr},

    {ngx_string("ratelimit_log_level"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_TAKE1,
     ngx_conf_set_enum_slot,
     NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(LocConf, log_level),
     log_levels},

    ngx_null_command,
};

void *create_main_conf(ngx_conf_t *cf) noexcept
{
    auto *mcf = static_cast<MainConf *>(
        ngx_pcalloc(cf->pool, sizeof(MainConf)));

    if (mcf == nullptr) {
        return nullptr;
    }

    if (ngx_array_init(&mcf->zones, cf->pool, 4, sizeof(Zone *)) != NGX_OK) {
        return nullptr;
    }

    mcf->local_memory = NGX_CONF_UNSET_SIZE;
    init_redis_defaults(mcf);
    return mcf;
}

char *init_main_conf(ngx_conf_t *cf, void *conf) noexcept
{
    auto *mcf = static_cast<MainConf *>(conf);

    if (mcf->prefix.data == nullptr) {
        ngx_str_set(&mcf->prefix, "rl");
    }

    ngx_conf_init_size_value(mcf->local_memory, kDefaultLocalMemory);

    return finish_redis_conf(cf, mcf);
}

void *create_loc_conf(ngx_conf_t *cf) noexcept
{
    auto *lcf = static_cast<LocConf *>(
        ngx_pcalloc(cf->pool, sizeof(LocConf)));

    if (lcf == nullptr) {
        return nullptr;
    }

    lcf->zones = static_cast<ngx_array_t *>(NGX_CONF_UNSET_PTR);
    lcf->settles = static_cast<ngx_array_t *>(NGX_CONF_UNSET_PTR);
    lcf->status = NGX_CONF_UNSET_UINT;
    lcf->headers = NGX_CONF_UNSET;
    lcf->fail = NGX_CONF_UNSET_UINT;
    lcf->dry_run = NGX_CONF_UNSET;
    lcf->log_level = NGX_CONF_UNSET_UINT;
    return lcf;
}

char *merge_loc_conf(ngx_conf_t *cf, void *parent, void *child) noexcept
{
    auto *prev = static_cast<LocConf *>(parent);
    auto *conf = static_cast<LocConf *>(child);

    // Settles go with the zones they settle: a location that applies
    // zones of its own inherits none.
    if (conf->settles == NGX_CONF_UNSET_PTR
        && conf->zones == NGX_CONF_UNSET_PTR)
    {
        conf->settles = prev->settles;
    }

    if (conf->zones == NGX_CONF_UNSET_PTR) {
        conf->zones = prev->zones;
    }

    auto *mcf = static_cast<MainConf *>(
        ngx_http_conf_get_module_main_conf(cf, ngx_http_ratelimit_module));

    char *rv = NGX_CONF_OK;

    if (conf->zones != NGX_CONF_UNSET_PTR) {
        rv = resolve_zones(cf, mcf, conf->zones);
        rv = rv == NGX_CONF_OK ? check_concurrency_refs(cf, conf->zones) : rv;
    }

    if (rv == NGX_CONF_OK && conf->query != nullptr) {
        rv = resolve_zones(cf, mcf, conf->query);
    }

    if (rv == NGX_CONF_OK && conf->settles != NGX_CONF_UNSET_PTR) {
        rv = resolve_settles(cf, conf);
    }

    if (rv != NGX_CONF_OK) {
        return rv;
    }

    ngx_conf_merge_str_value(conf->peek_header, prev->peek_header, "");

    ngx_conf_merge_uint_value(conf->status, prev->status,
                              NGX_HTTP_TOO_MANY_REQUESTS);
    ngx_conf_merge_value(conf->headers, prev->headers, 1);
    merge_fail(cf, conf, prev);
    ngx_conf_merge_value(conf->dry_run, prev->dry_run, 0);
    ngx_conf_merge_uint_value(conf->log_level, prev->log_level, NGX_LOG_ERR);
    return NGX_CONF_OK;
}

}  // namespace ratelimit
