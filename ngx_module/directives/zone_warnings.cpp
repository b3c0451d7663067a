#include "directives/zone_warnings.hpp"

#include "directives/conf_params.hpp"
#include "params/zone_warnings.hpp"

namespace ratelimit {

namespace {

// The variables nginx knows so far: those modules and the directives
// before this one declared (variables_keys), those used so far
// (`variables`: a `map` after the zone may declare one), and the prefixes
// it reads any name after.  nginx keeps them until the http block is read.
KnownVariables known_variables(ngx_conf_t *cf)
{
    auto *cmcf = static_cast<ngx_http_core_main_conf_t *>(
        ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module));
    KnownVariables known;

    if (cmcf->variables_keys != nullptr) {
        const auto *keys = static_cast<const ngx_hash_key_t *>(
            cmcf->variables_keys->keys.elts);

        for (ngx_uint_t i = 0; i < cmcf->variables_keys->keys.nelts; i++) {
            known.names.push_back(view(keys[i].key));
        }
    }

    const auto *used = static_cast<const ngx_http_variable_t *>(
        cmcf->variables.elts);

    for (ngx_uint_t i = 0; i < cmcf->variables.nelts; i++) {
        known.names.push_back(view(used[i].name));
    }

    const auto *prefixes = static_cast<const ngx_http_variable_t *>(
        cmcf->prefix_variables.elts);

    for (ngx_uint_t i = 0; i < cmcf->prefix_variables.nelts; i++) {
        known.prefixes.push_back(view(prefixes[i].name));
    }

    return known;
}

}  // namespace

void warn_client_value(ngx_conf_t *cf, std::string_view param,
                       std::string_view value)
{
    auto text = client_value_warning(param, value);

    if (text) {
        directive_warning(cf, "%*s", text->size(), text->data());
    }
}

void warn_zone(ngx_conf_t *cf, const ZoneParams &params)
{
    for (const std::string &text : params.warnings) {
        directive_warning(cf, "%*s", text.size(), text.data());
    }

    warn_client_value(cf, params.limit_is_rate ? "rate" : "limit",
                      params.limit_variable);

    if (params.key.find('$') != std::string_view::npos) {
        return;
    }

    auto text = literal_key_warning(params.key, known_variables(cf));

    if (text) {
        directive_warning(cf, "%*s", text->size(), text->data());
    }
}

}  // namespace ratelimit
