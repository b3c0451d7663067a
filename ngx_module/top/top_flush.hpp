// A worker's flush of its server's finished time slices: every second
// (a timer armed by start(), removed by the destructor), for each zone
// keeping its top, the slice before the current one if no worker of the
// server took it yet (top/top_memory.hpp), sent to Redis in one call
// (src/top/top_script.hpp): the first worker whose timer comes after the
// slice ends sends it, so a slice leaves a server once, within about a
// second of its end.  Redis down, or the reply lost: the slice is dropped,
// never sent again (a call whose outcome is unknown may have counted).
// NOSCRIPT (the script did not run): sent again once with its text.
#pragma once

#include "conf/module_conf.hpp"

namespace ratelimit {

class RedisLink;
struct Reply;

class TopFlusher {
public:
    TopFlusher(RedisLink *link, const MainConf &mcf, ngx_log_t *log) noexcept;
    ~TopFlusher();

    TopFlusher(const TopFlusher &) = delete;
    TopFlusher &operator=(const TopFlusher &) = delete;

    void start() noexcept;

private:
    struct Call;

    static void on_timer(ngx_event_t *ev) noexcept;
    static void on_reply(void *data, const Reply *reply) noexcept;
    void flush(const Zone &zone, std::uint64_t now_s) noexcept;
    bool send(Call *call, bool eval) noexcept;

    RedisLink *link_;
    const MainConf &mcf_;
    ngx_log_t *log_;
    ngx_event_t timer_;
};

}  // namespace ratelimit
