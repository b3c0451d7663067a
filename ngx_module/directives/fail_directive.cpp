#include "directives/fail_directive.hpp"

#include "directives/conf_params.hpp"
#include "limits/policy.hpp"

namespace ratelimit {

namespace {

bool policy_named(const ngx_str_t &word, ngx_uint_t *policy)
{
    static const struct {
        std::string_view name;
        FailPolicy policy;
    } kPolicies[] = {
        {"open", kFailOpen}, {"closed", kFailClosed}, {"local", kFailLocal},
    };

    for (const auto &p : kPolicies) {
        if (view(word) == p.name) {
            *policy = p.policy;
            return true;
        }
    }

    return false;
}

char *check_local_memory(ngx_conf_t *cf, void *, void *data) noexcept
{
    if (*static_cast<size_t *>(data) < kMinLocalMemory) {
        return directive_error(cf, "\"%V\" must be at least %uzk",
                               static_cast<ngx_str_t *>(cf->args->elts),
                               kMinLocalMemory / 1024);
    }

    return NGX_CONF_OK;
}

}  // namespace

ngx_conf_post_t local_memory_bounds = {check_local_memory};

char *set_fail(ngx_conf_t *cf, ngx_command_t *, void *conf) noexcept
{
    auto *lcf = static_cast<LocConf *>(conf);
    auto *args = static_cast<ngx_str_t *>(cf->args->elts);
    ngx_uint_t policy;

    if (lcf->fail != NGX_CONF_UNSET_UINT) {
        return duplicate_directive(cf);
    }

    if (!policy_named(args[1], &policy)) {
        return invalid_param(cf, args[1]);
    }

    ngx_uint_t servers = 0;
    ngx_uint_t status = NGX_HTTP_SERVICE_UNAVAILABLE;

    for (ngx_uint_t i = 2; i < cf->args->nelts; i++) {
        ngx_str_t value;
        bool counted = policy == kFailLocal
                       && take_param(args[i], "servers=", &value);
        bool coded = policy == kFailClosed
                     && take_param(args[i], "status=", &value);

        if (!counted && !coded) {
            return invalid_param(cf, args[i]);
        }

        std::optional<std::uint64_t> n = parse_count(view(value));

        if (counted && (!n || *n > NGX_MAX_INT32_VALUE)) {
            return invalid_param(cf, args[i]);
        }

        if (coded && (!n || *n < 400 || *n > 599)) {
            return directive_error(cf, "\"%V\" must be between 400 and "
                                       "599", &args[i]);
        }

        (counted ? servers : status) = static_cast<ngx_uint_t>(*n);
    }

    lcf->fail = policy;
    lcf->fail_servers = servers;
    lcf->fail_status = status;
    return NGX_CONF_OK;
}

void merge_fail(ngx_conf_t *cf, LocConf *conf, const LocConf *prev) noexcept
{
    if (conf->fail == NGX_CONF_UNSET_UINT) {
        conf->fail = prev->fail == NGX_CONF_UNSET_UINT ? kFailOpen
                                                       : prev->fail;
        conf->fail_servers = prev->fail_servers;
        conf->fail_status = prev->fail == NGX_CONF_UNSET_UINT
                            ? NGX_HTTP_SERVICE_UNAVAILABLE
                            : prev->fail_status;
    }

    if (conf->fail == kFailLocal && conf->zones != NGX_CONF_UNSET_PTR
        && conf->zones->nelts > 0)
    {
        auto *mcf = static_cast<MainConf *>(
            ngx_http_conf_get_module_main_conf(cf, ngx_http_ratelimit_module));
        mcf->fail_local = true;
        mcf->local = true;
    }
}

}  // namespace ratelimit
