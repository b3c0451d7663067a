// nginx's headers, and the small pieces of nginx glue every layer of the
// shell uses: views of nginx strings, the module's own timers and events,
// and the throttle of a worker's log lines about Redis.
#pragma once

extern "C" {
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>
}

#include <string_view>

extern "C" ngx_module_t ngx_http_ratelimit_module;

namespace ratelimit {

inline std::string_view view(const ngx_str_t &s)
{
    return {reinterpret_cast<const char *>(s.data), s.len};
}

// Deletes the event's timer if it is set.
inline void stop_timer(ngx_event_t *ev)
{
    if (ev->timer_set) {
        ngx_del_timer(ev);
    }
}

// An event of the module's own (a timer, or posted): `cancelable`, so that
// it never holds a gracefully exiting worker.
void init_event(ngx_event_t *ev, ngx_event_handler_pt handler, void *data,
                ngx_log_t *log) noexcept;

// At most one line a second for a worker's Redis troubles, however many
// connections and requests share them.
class LogThrottle {
public:
    bool allow() noexcept
    {
        if (ngx_time() == last_) {
            return false;
        }

        last_ = ngx_time();
        return true;
    }

private:
    time_t last_ = 0;
};

}  // namespace ratelimit
