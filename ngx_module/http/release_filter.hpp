// Gives a concurrency zone's permit back as the response's last byte leaves,
// not when nginx frees the request: a request may outlive its response by
// seconds (discarding a body it did not read, a lingering close), and the
// permit is for the response.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

ngx_int_t install_release_filter(ngx_conf_t *cf) noexcept;

}  // namespace ratelimit
