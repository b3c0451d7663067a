#include "local/local_breaker.hpp"

#include <unistd.h>

#include <new>

#include "local/local_memory.hpp"
#include "metrics/metrics.hpp"
#include "scripts/servers_script.hpp"

namespace ratelimit {

namespace {

// This server in the set of live servers: its host name and its master
// process's pid, which a reload keeps.
std::string server_id(const ngx_cycle_t *cycle)
{
    ngx_pid_t master = ngx_process == NGX_PROCESS_WORKER ? getppid()
                                                         : ngx_pid;
    std::string id(view(cycle->hostname));

    return id.append(1, ':').append(std::to_string(master));
}

}  // namespace

LocalBreaker::LocalBreaker(RedisLink *link, const MainConf &mcf,
                           ngx_log_t *log) noexcept
    : link_(link), mcf_(mcf), zone_(mcf.local_zone),
      timeout_(mcf.redis->timeout), log_(log)
{
    init_event(&tick_, on_tick, this, log);
}

LocalBreaker::~LocalBreaker()
{
    stop_timer(&tick_);
    metrics::record_local_state(false);
}

bool LocalBreaker::start(const ngx_cycle_t *cycle) noexcept
{
    try {
        key_ = servers_key(view(mcf_.prefix), mcf_.redis->cluster);
        call_ = servers_call(key_, ngx_worker == 0 ? server_id(cycle)
                                                   : std::string());
    } catch (const std::bad_alloc &) {
        return false;
    }

    if (call_.empty() || !link_->on_up(on_link_up, this)) {
        return false;
    }

    link_->on_trouble(on_link_trouble, this);
    schedule();
    return true;
}

ngx_uint_t LocalBreaker::servers(ngx_uint_t configured) noexcept
{
    if (configured > 0) {
        return configured;
    }

    ngx_uint_t live = zone_ != nullptr ? local::live_servers(zone_) : 0;

    if (live > 0) {
        return live;
    }

    if (!warned_unknown_) {
        warned_unknown_ = true;
        ngx_log_error(NGX_LOG_WARN, log_, 0,
                      "ratelimit: redis was never reached, so the live "
                      "servers are unknown: each admits the whole limit "
                      "locally (set \"servers=\" of ratelimit_fail local)");
    }

    return 1;
}

// Opens or closes, logging the change (each way at most once a second).
void LocalBreaker::turn(bool open) noexcept
{
    if (open_ == open) {
        return;
    }

    open_ = open;
    metrics::record_local_state(open);

    // Only `fail local` requests turn with it: with leases alone (the
    // other reason for a breaker) the link's own lines tell of Redis.
    if (mcf_.fail_local && (open ? open_log_ : close_log_).allow()) {
        ngx_log_error(NGX_LOG_WARN, log_, 0, open
                      ? "ratelimit: redis cannot be reached, deciding "
                        "\"ratelimit_fail local\" requests locally"
                      : "ratelimit: redis answers again, handing "
                        "\"ratelimit_fail local\" requests back to it");
    }

    if (open) {
        stop_timer(&tick_);
        schedule();
    }
}

// One call at a time: one still unanswered past the timeout is a stall.
void LocalBreaker::ask() noexcept
{
    if (asking_) {
        if (ngx_current_msec - asked_at_ >= timeout_) {
            link_->on_request_timeout();
        }
        return;
    }

    if (link_->send_for_key(key_, call_, on_reply, this)) {
        asking_ = true;
        asked_at_ = ngx_current_msec;
    }
}

void LocalBreaker::schedule() noexcept
{
    if (!tick_.timer_set && !ngx_exiting && !ngx_quit && !ngx_terminate) {
        ngx_add_timer(&tick_, open_ ? kProbeMs : kCountMs);
    }
}

void LocalBreaker::on_tick(ngx_event_t *ev) noexcept
{
    auto *breaker = static_cast<LocalBreaker *>(ev->data);

    breaker->ask();
    breaker->schedule();
}

// nullptr: the connection ended, which the link tells as trouble.  Any
// reply, an error too, is Redis answering.
void LocalBreaker::on_reply(void *data, const Reply *reply) noexcept
{
    auto *breaker = static_cast<LocalBreaker *>(data);

    breaker->asking_ = false;

    if (reply == nullptr) {
        return;
    }

    if (reply->type == Reply::Type::kInteger && reply->integer > 0
        && breaker->zone_ != nullptr)
    {
        local::learn_live_servers(breaker->zone_,
                                  static_cast<ngx_uint_t>(reply->integer),
                                  wall_clock_ms());
    }

    breaker->turn(false);
}

void LocalBreaker::on_link_up(void *data) noexcept
{
    static_cast<LocalBreaker *>(data)->ask();
}

void LocalBreaker::on_link_trouble(void *data) noexcept
{
    static_cast<LocalBreaker *>(data)->turn(true);
}

}  // namespace ratelimit
