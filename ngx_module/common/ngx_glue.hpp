// nginx's headers, and the small pieces of nginx glue every layer of the
// shell uses: views of nginx strings, the module's own timers and events,
// peers' words made safe for the log, and the throttle of a worker's log
// lines about Redis.
#pragma once

extern "C" {
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>
}

#include <string_view>

#include "base/printable_text.hpp"

extern "C" ngx_module_t ngx_http_ratelimit_module;

namespace ratelimit {

inline std::string_view view(const ngx_str_t &s)
{
    return {reinterpret_cast<const char *>(s.data), s.len};
}

// Wall-clock time in ms since the epoch, as nginx last read it: the clock
// of the local windows and of calendar zones' periods.
inline std::uint64_t wall_clock_ms()
{
    ngx_time_t *tp = ngx_timeofday();
    return static_cast<std::uint64_t>(tp->sec) * 1000 + tp->msec;
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

// Appends `handler` to the handlers of `phase` (nginx runs a phase's
// handlers from the last added to the first); NGX_ERROR on no memory.
ngx_int_t add_phase_handler(ngx_conf_t *cf, ngx_http_phases phase,
                            ngx_http_handler_pt handler) noexcept;

// Appends a header to r's response; false on no memory.  `name` and
// `value` must live as long as the request.
bool add_header(ngx_http_request_t *r, ngx_str_t name, ngx_str_t value);

// The first of r's request headers named `name` (any case); nullptr if
// none.  Read by name, not through headers_in's fields, some of which an
// nginx built without --with-compat lacks (Accept: NGX_HTTP_HEADERS).
const ngx_table_elt_t *find_header(ngx_http_request_t *r,
                                   const ngx_str_t &name) noexcept;

// What a peer says (an error reply, an address it names) as it may go
// into the error log, "%V" of str(), between quotes or not: see
// base/printable_text.hpp.  A newline in a Redis error cannot forge a log
// line.
class LoggedText {
public:
    explicit LoggedText(std::string_view text,
                        Quoted quoted = Quoted::kNo) noexcept
    {
        str_.data = buf_;
        str_.len = write_printable(text, kMaxShown,
                                   reinterpret_cast<char *>(buf_), quoted);
    }

    const ngx_str_t *str() const noexcept { return &str_; }

private:
    static constexpr size_t kMaxShown = 256;  // bytes of the text
    u_char buf_[printable_size(kMaxShown)];
    ngx_str_t str_;
};

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
