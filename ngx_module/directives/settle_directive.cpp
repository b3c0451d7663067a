#include "directives/settle_directive.hpp"

#include "directives/conf_params.hpp"
#include "limits/algorithms.hpp"

namespace ratelimit {

namespace {

// Adds a settle of zone `name` to the location; its zone is bound in
// resolve_settles().
char *push_settle_ref(ngx_conf_t *cf, LocConf *lcf, const ngx_str_t &name,
                      ngx_str_t value, bool refund)
{
    if (lcf->settles == NGX_CONF_UNSET_PTR) {
        lcf->settles = ngx_array_create(cf->pool, 1, sizeof(SettleRef));
        if (lcf->settles == nullptr) {
            return nginx_logged_error();
        }
    }

    auto *settles = static_cast<SettleRef *>(lcf->settles->elts);

    for (ngx_uint_t i = 0; i < lcf->settles->nelts; i++) {
        if (view(settles[i].name) == view(name)) {
            return directive_error(cf, "zone \"%V\" is settled already",
                                   &name);
        }
    }

    auto *settle = static_cast<SettleRef *>(ngx_array_push(lcf->settles));

    if (settle == nullptr || !compile_value(cf, &value, &settle->value)) {
        return nginx_logged_error();
    }

    settle->name = name;
    settle->zone = nullptr;
    settle->refund_empty = refund;
    settle->file = cf->conf_file->file.name;
    settle->line = cf->conf_file->line;

    auto *mcf = static_cast<MainConf *>(
        ngx_http_conf_get_module_main_conf(cf, ngx_http_ratelimit_module));
    mcf->settles = true;
    return NGX_CONF_OK;
}

}  // namespace

// `ratelimit_settle zone=NAME VALUE [empty=keep|refund];`
char *set_settle(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept
{
    auto *lcf = static_cast<LocConf *>(conf);
    auto *args = static_cast<ngx_str_t *>(cf->args->elts);
    ngx_str_t name = ngx_null_string;
    ngx_str_t value = ngx_null_string;
    ngx_str_t empty = ngx_null_string;

    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        char *rv = NGX_CONF_OK;

        if (args[i].len >= 5 && ngx_strncmp(args[i].data, "zone=", 5) == 0) {
            rv = take_zone_name(cf, args[i], &name);
        } else if (args[i].len >= 6
                   && ngx_strncmp(args[i].data, "empty=", 6) == 0)
        {
            rv = empty.data != nullptr ? duplicate_param(cf, args[i])
                                       : NGX_CONF_OK;
            take_param(args[i], "empty=", &empty);
        } else if (value.data == nullptr) {
            value = args[i];
        } else {
            rv = invalid_param(cf, args[i]);
        }

        if (rv != NGX_CONF_OK) {
            return rv;
        }
    }

    if (name.data == nullptr || value.data == nullptr) {
        return directive_error(cf, "\"%V\" must have \"zone=\" and a value",
                               &args[0]);
    }

    bool refund = empty.len == 6 && ngx_strncmp(empty.data, "refund", 6) == 0;

    if (empty.data != nullptr && !refund
        && !(empty.len == 4 && ngx_strncmp(empty.data, "keep", 4) == 0))
    {
        return directive_error(cf, "invalid parameter \"empty=%V\": "
                                   "\"keep\" or \"refund\"", &empty);
    }

    return push_settle_ref(cf, lcf, name, value, refund);
}

// Binds each settle of a location to the zone the location applies under
// its name.  A settle that may give units back marks its zone so (see
// Zone::gives_back): a reservation of more than 0 units can be more than
// the value, and empty=refund gives it all back.
char *resolve_settles(ngx_conf_t *cf, LocConf *lcf) noexcept
{
    auto *settles = static_cast<SettleRef *>(lcf->settles->elts);
    bool has_zones = lcf->zones != NGX_CONF_UNSET_PTR;
    auto *refs = has_zones ? static_cast<ZoneRef *>(lcf->zones->elts)
                           : nullptr;

    for (ngx_uint_t i = 0; i < lcf->settles->nelts; i++) {
        SettleRef &settle = settles[i];
        ngx_uint_t r = 0;

        while (has_zones && r < lcf->zones->nelts
               && view(refs[r].name) != view(settle.name))
        {
            r++;
        }

        if (!has_zones || r == lcf->zones->nelts
            || refs[r].zone->concurrency != nullptr
            || !row_of(refs[r].zone->policy).accepts_settles)
        {
            return after_block_error(cf, "ratelimit_settle zone \"%V\" "
                                         "needs \"ratelimit zone=%V\" of a "
                                         "sliding or fixed window in the "
                                         "same location, in %V:%ui",
                                     &settle.name, &settle.name, &settle.file,
                                     settle.line);
        }

        if (refs[r].zone->leases != nullptr) {
            return after_block_error(cf, "ratelimit_settle zone \"%V\": a "
                                         "zone with \"lease=\" takes no "
                                         "settle, in %V:%ui",
                                     &settle.name, &settle.file,
                                     settle.line);
        }

        settle.zone = refs[r].zone;

        if (refs[r].cost_value != nullptr || refs[r].cost > 0) {
            refs[r].zone->gives_back = true;
        }
    }

    return NGX_CONF_OK;
}

}  // namespace ratelimit
