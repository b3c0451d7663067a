#include "directives/conf_places.hpp"

#include "directives/conf_params.hpp"

namespace ratelimit {

char *note_place(ngx_conf_t *cf, const ngx_str_t &directive) noexcept
{
    auto *mcf = static_cast<MainConf *>(
        ngx_http_conf_get_module_main_conf(cf, ngx_http_ratelimit_module));

    if (mcf->places == nullptr) {
        mcf->places = ngx_array_create(cf->pool, 4, sizeof(ConfPlace));

        if (mcf->places == nullptr) {
            return nginx_logged_error();
        }
    }

    auto *place = static_cast<ConfPlace *>(ngx_array_push(mcf->places));

    if (place == nullptr) {
        return nginx_logged_error();
    }

    place->directive = directive;
    place->file = cf->conf_file->file.name;
    place->line = cf->conf_file->line;
    return NGX_CONF_OK;
}

const ConfPlace *find_place(const MainConf *mcf,
                            const char *directive) noexcept
{
    if (mcf->places == nullptr) {
        return nullptr;
    }

    const auto *places = static_cast<const ConfPlace *>(mcf->places->elts);
    size_t len = ngx_strlen(directive);

    for (ngx_uint_t i = 0; i < mcf->places->nelts; i++) {
        if (places[i].directive.len == len
            && ngx_strncmp(places[i].directive.data, directive, len) == 0)
        {
            return &places[i];
        }
    }

    return nullptr;
}

}  // namespace ratelimit
