#include "directives/conf_merge.hpp"

#include <algorithm>

#include "directives/concurrency_zone.hpp"
#include "directives/conf_params.hpp"
#include "directives/fail_directive.hpp"
#include "directives/redis_directives.hpp"
#include "directives/settle_directive.hpp"
#include "directives/zone_directive.hpp"
#include "keys/subject_key.hpp"
#include "limits/algorithms.hpp"
#include "limits/window_rules.hpp"

namespace ratelimit {

namespace {

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
    lcf->grpc = NGX_CONF_UNSET;
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
    ngx_conf_merge_value(conf->grpc, prev->grpc, 1);
    ngx_conf_merge_value(conf->headers, prev->headers, 1);
    merge_fail(cf, conf, prev);
    ngx_conf_merge_value(conf->dry_run, prev->dry_run, 0);
    ngx_conf_merge_uint_value(conf->log_level, prev->log_level, NGX_LOG_ERR);
    return NGX_CONF_OK;
}

ngx_int_t name_side_keys(ngx_conf_t *cf, MainConf *mcf) noexcept
{
    auto **zones = static_cast<Zone **>(mcf->zones.elts);

    for (ngx_uint_t i = 0; i < mcf->zones.nelts; i++) {
        Zone &zone = *zones[i];

        if (zone.concurrency != nullptr
            || (!mcf->overrides && zone.ban_ms == 0))
        {
            continue;
        }

        std::size_t size = side_base_size(view(mcf->prefix), view(zone.name));
        auto *data = static_cast<u_char *>(ngx_pnalloc(cf->pool, size));

        if (data == nullptr) {
            return NGX_ERROR;
        }

        zone.side_base.data = data;
        zone.side_base.len = write_side_base(
            view(mcf->prefix), view(zone.name), reinterpret_cast<char *>(data));
    }

    return NGX_OK;
}

}  // namespace ratelimit
