#include "common/ngx_glue.hpp"

namespace ratelimit {

void init_event(ngx_event_t *ev, ngx_event_handler_pt handler, void *data,
                ngx_log_t *log) noexcept
{
    ngx_memzero(ev, sizeof(ngx_event_t));
    ev->handler = handler;
    ev->data = data;
    ev->log = log;
    ev->cancelable = 1;
}

}  // namespace ratelimit
