#include "directives/concurrency_zone.hpp"

#include "directives/conf_params.hpp"

namespace ratelimit {

char *check_concurrency_refs(ngx_conf_t *cf, ngx_array_t *refs) noexcept
{
    auto *ref = static_cast<ZoneRef *>(refs->elts);
    const ZoneRef *first = nullptr;

    for (ngx_uint_t i = 0; i < refs->nelts; i++) {
        if (ref[i].zone->concurrency == nullptr) {
            continue;
        }

        if (first != nullptr) {
            return after_block_error(cf, "concurrency zone \"%V\" in "
                                         "%V:%ui: a location takes one "
                                         "concurrency zone, and has \"%V\"",
                                     &ref[i].name, &ref[i].file, ref[i].line,
                                     &first->name);
        }

        first = &ref[i];
    }

    return NGX_CONF_OK;
}

}  // namespace ratelimit
