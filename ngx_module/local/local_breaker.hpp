// A worker's breaker for `ratelimit_fail local`: open from the first sign
// that Redis cannot be reached (a connection lost or refused, a wait run
// out: RedisLink::on_trouble()), and closed by the first reply of Redis.
// While it is open, requests of `fail local` locations are decided in this
// server's memory at once, with no call to Redis.  Each worker has its own
// (each has its own link).
//
// Its probe is the live-servers call (scripts/servers_script.hpp): sent
// every kProbeMs while open, every kCountMs while closed (from worker 0 it
// announces the server too), and at once when the link comes up, so that
// the breaker closes within about a second of Redis answering.  A call
// unanswered for the Redis `timeout` counts as a request's timeout: the
// breaker opens, and a connection silent for RedisLink::kStallMs is
// replaced.
#pragma once

#include <string>

#include "conf/module_conf.hpp"
#include "redis/redis_link.hpp"

namespace ratelimit {

class LocalBreaker {
public:
    LocalBreaker(RedisLink *link, const MainConf &mcf,
                 ngx_log_t *log) noexcept;
    ~LocalBreaker();

    LocalBreaker(const LocalBreaker &) = delete;
    LocalBreaker &operator=(const LocalBreaker &) = delete;

    // Makes its calls and listens to the link: before the link connects.
    // False on no memory, or if the link takes no more listeners.
    bool start(const ngx_cycle_t *cycle) noexcept;

    bool open() const noexcept { return open_; }

    // The servers a limit is shared among: `configured` (servers=) unless
    // 0, else the live servers learnt from Redis, else 1 (and a warning,
    // once).
    ngx_uint_t servers(ngx_uint_t configured) noexcept;

    static constexpr ngx_msec_t kProbeMs = 250;
    static constexpr ngx_msec_t kCountMs = 1000;

private:
    void turn(bool open) noexcept;
    void ask() noexcept;
    void schedule() noexcept;
    static void on_tick(ngx_event_t *ev) noexcept;
    static void on_reply(void *data, const Reply *reply) noexcept;
    static void on_link_up(void *data) noexcept;
    static void on_link_trouble(void *data) noexcept;

    RedisLink *link_;
    const MainConf &mcf_;
    ngx_shm_zone_t *zone_;
    ngx_msec_t timeout_;       // a request's wait for Redis, ms
    ngx_log_t *log_;
    std::string key_;
    std::string call_;         // announces this server from worker 0
    ngx_event_t tick_;
    bool open_ = false;
    bool asking_ = false;      // a call waits for its reply
    ngx_msec_t asked_at_ = 0;
    bool warned_unknown_ = false;
    LogThrottle open_log_;
    LogThrottle close_log_;
};

}  // namespace ratelimit
