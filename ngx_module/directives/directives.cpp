#include "directives/directives.hpp"

#include "directives/conf_params.hpp"
#include "directives/zone_warnings.hpp"
#include "directives/conf_places.hpp"
#include "directives/fail_directive.hpp"
#include "status/dashboard_handler.hpp"
#include "status/metrics_handler.hpp"
#include "limits/gcra.hpp"
#include "report/dashboard_page.hpp"
#include "directives/redis_directives.hpp"
#include "directives/settle_directive.hpp"
#include "directives/zone_directive.hpp"
#include "status/status_api.hpp"
#include "status/status_handler.hpp"

namespace ratelimit {

namespace {

char *set_ratelimit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept;
char *set_query(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept;
char *set_metrics(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept;
char *set_dashboard(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept;

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

    try {
        warn_client_value(cf, "cost", view(value));
    } catch (const std::bad_alloc &) {
        return nginx_logged_error();
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

        bool *flag = take_param(args[i], "delete=", &name)
                     ? &lcf->query_delete
                     : take_param(args[i], "override=", &name)
                     ? &lcf->query_override : nullptr;

        if (flag != nullptr) {
            if (view(name) != "on" && view(name) != "off") {
                return invalid_param(cf, args[i]);
            }

            *flag = view(name) == "on";
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

    auto *mcf = static_cast<MainConf *>(
        ngx_http_conf_get_module_main_conf(cf, ngx_http_ratelimit_module));
    mcf->forgive |= lcf->query_delete || lcf->query_override;
    mcf->overrides |= lcf->query_override;

    auto *clcf = static_cast<ngx_http_core_loc_conf_t *>(
        ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module));
    clcf->handler = status_api_handler;
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

// One parameter of `ratelimit_dashboard` into links, each given once;
// false if it is none of them.
bool take_link(ngx_conf_t *cf, const ngx_str_t &arg, DashboardLinks *links,
               unsigned *given, char **rv)
{
    static const char *const kNames[] = {"metrics=", "status=", "delete=",
                                         "override="};
    constexpr unsigned kCount = sizeof(kNames) / sizeof(kNames[0]);
    ngx_str_t value;
    unsigned which = 0;

    while (which < kCount && !take_param(arg, kNames[which], &value)) {
        which++;
    }

    if (which == kCount) {
        return false;
    }

    bool uri = which < 2;
    bool ok = uri ? dashboard_uri_ok(view(value))
                  : view(value) == "on" || view(value) == "off";

    if (*given & (1u << which)) {
        *rv = duplicate_param(cf, arg);
    } else if (!ok) {
        *rv = invalid_param(cf, arg);
    } else if (uri) {
        (which == 0 ? links->metrics : links->status) = view(value);
    } else {
        (which == 2 ? links->forgive : links->override_limit) =
            view(value) == "on";
    }

    *given |= 1u << which;
    return true;
}

// The page is made here, once: its links are the configuration's.
char *set_dashboard(ngx_conf_t *cf, ngx_command_t *, void *conf) noexcept
{
    auto *lcf = static_cast<LocConf *>(conf);
    auto *args = static_cast<ngx_str_t *>(cf->args->elts);
    DashboardLinks links{"/metrics", "/ratelimit", false, false};
    unsigned given = 0;

    if (lcf->dashboard.len > 0) {
        return duplicate_directive(cf);
    }

    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        char *rv = NGX_CONF_OK;

        if (!take_link(cf, args[i], &links, &given, &rv)) {
            return invalid_param(cf, args[i]);
        }

        if (rv != NGX_CONF_OK) {
            return rv;
        }
    }

    try {
        std::string page = dashboard_page(links);
        lcf->dashboard.data = static_cast<u_char *>(
            ngx_pnalloc(cf->pool, page.size()));

        if (lcf->dashboard.data == nullptr) {
            return nginx_logged_error();
        }

        ngx_memcpy(lcf->dashboard.data, page.data(), page.size());
        lcf->dashboard.len = page.size();
    } catch (const std::bad_alloc &) {
        return nginx_logged_error();
    }

    auto *clcf = static_cast<ngx_http_core_loc_conf_t *>(
        ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module));
    clcf->handler = dashboard_handler;
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

    {ngx_string("ratelimit_dashboard"),
     NGX_HTTP_LOC_CONF | NGX_CONF_ANY,
     set_dashboard,
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

    {ngx_string("ratelimit_grpc"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_FLAG,
     ngx_conf_set_flag_slot,
     NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(LocConf, grpc),
     nullptr},

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

}  // namespace ratelimit
