#include "directives/zone_changes.hpp"

#include "directives/conf_params.hpp"
#include "limits/algorithms.hpp"

namespace ratelimit {

namespace {

// The module's main conf of the configuration being replaced; nullptr on
// a first start or `nginx -t`, or if it did not load the module.  nginx
// keeps a module's ctx_index across reloads (ngx_count_modules()), so it
// finds the old conf where the module put it.
const MainConf *running_conf(ngx_conf_t *cf)
{
    ngx_cycle_t *old = cf->cycle->old_cycle;

    if (old == nullptr || ngx_is_init_cycle(old) || old->modules == nullptr
        || old->conf_ctx[ngx_http_module.index] == nullptr)
    {
        return nullptr;
    }

    for (ngx_uint_t i = 0; old->modules[i] != nullptr; i++) {
        if (old->modules[i] == &ngx_http_ratelimit_module) {
            return static_cast<const MainConf *>(
                ngx_http_cycle_get_module_main_conf(
                    old, ngx_http_ratelimit_module));
        }
    }

    return nullptr;
}

const Zone *running_zone(const MainConf *mcf, const ngx_str_t &name)
{
    auto **zones = static_cast<Zone **>(mcf->zones.elts);

    for (ngx_uint_t i = 0; i < mcf->zones.nelts; i++) {
        if (view(zones[i]->name) == view(name)) {
            return zones[i];
        }
    }

    return nullptr;
}

// Whether a calendar zone counts in other periods than it did: another
// period, start or time zone.
bool periods_changed(const Zone &now, const Zone &then)
{
    const PeriodStart &a = now.calendar->start();
    const PeriodStart &b = then.calendar->start();

    return now.calendar->kind() != then.calendar->kind()
           || view(now.tz) != view(then.tz) || a.hour != b.hour
           || a.minute != b.minute || a.weekday != b.weekday
           || a.month != b.month || a.day != b.day;
}

}  // namespace

void warn_zone_change(ngx_conf_t *cf, const Zone &zone) noexcept
{
    const MainConf *mcf = running_conf(cf);
    const Zone *was = mcf != nullptr ? running_zone(mcf, zone.name)
                                     : nullptr;

    if (was == nullptr || zone.concurrency != nullptr
        || was->concurrency != nullptr)
    {
        return;
    }

    const Policy &now = zone.policy;
    const Policy &then = was->policy;
    static const char kWhat[] = ": its counts in Redis start afresh; to "
                                "keep them, give the new one another name "
                                "and switch once its window has passed";

    if (now.algorithm != then.algorithm) {
        std::string_view from = row_of(then).name;
        std::string_view to = row_of(now).name;
        directive_warning(cf, "zone \"%V\" changed its algorithm from %*s "
                              "to %*s%s", &zone.name, from.size(),
                          from.data(), to.size(), to.data(), kWhat);
    } else if (zone.calendar != nullptr) {
        if (periods_changed(zone, *was)) {
            directive_warning(cf, "zone \"%V\" changed its calendar "
                                  "periods (window=, start= or tz=)%s",
                              &zone.name, kWhat);
        }
    } else if (row_of(now).counts_per_bucket
               && now.bucket_ms != then.bucket_ms)
    {
        directive_warning(cf, "zone \"%V\" changed its bucket from %uL ms "
                              "to %uL ms%s", &zone.name, then.bucket_ms,
                          now.bucket_ms, kWhat);
    }
}

}  // namespace ratelimit
