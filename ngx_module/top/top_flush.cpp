#include "top/top_flush.hpp"

#include <new>

#include "metrics/metrics.hpp"
#include "redis/redis_link.hpp"
#include "top/top_memory.hpp"

namespace ratelimit {

namespace {

constexpr ngx_msec_t kFlushPeriodMs = 1000;

}  // namespace

struct TopFlusher::Call {
    TopFlusher *flusher;
    TopFlush flush;
    bool retried;
};

TopFlusher::TopFlusher(RedisLink *link, const MainConf &mcf,
                       ngx_log_t *log) noexcept
    : link_(link), mcf_(mcf), log_(log)
{
    init_event(&timer_, on_timer, this, log);
}

TopFlusher::~TopFlusher()
{
    stop_timer(&timer_);
}

void TopFlusher::start() noexcept
{
    ngx_add_timer(&timer_, kFlushPeriodMs);
}

void TopFlusher::on_timer(ngx_event_t *ev) noexcept
{
    auto *flusher = static_cast<TopFlusher *>(ev->data);
    auto **zones = static_cast<Zone **>(flusher->mcf_.zones.elts);
    auto now_s = static_cast<std::uint64_t>(ngx_time());

    for (ngx_uint_t i = 0; i < flusher->mcf_.zones.nelts; i++) {
        if (zones[i]->top > 0) {
            flusher->flush(*zones[i], now_s);
        }
    }

    if (!ngx_exiting) {
        ngx_add_timer(ev, kFlushPeriodMs);
    }
}

void TopFlusher::flush(const Zone &zone, std::uint64_t now_s) noexcept
{
    auto *call = new (std::nothrow) Call{this, {}, false};

    if (call == nullptr) {
        return;
    }

    try {
        if (!top::take_finished(mcf_.top_zone, zone, now_s, &call->flush)) {
            delete call;
            return;
        }

        call->flush.base = top_base(view(mcf_.prefix), view(zone.name),
                                    link_->clustered());
    } catch (...) {
        delete call;
        return;
    }

    if (!send(call, false)) {
        metrics::record_link_error(LinkError::kTopDropped);
        delete call;
    }
}

bool TopFlusher::send(Call *call, bool eval) noexcept
{
    std::string command;

    try {
        command = top_flush_call(call->flush, eval);
    } catch (...) {
        return false;
    }

    return link_->up()
           && link_->send_for_key(call->flush.base, command, on_reply, call);
}

void TopFlusher::on_reply(void *data, const Reply *reply) noexcept
{
    auto *call = static_cast<Call *>(data);

    if (reply != nullptr && top_no_script(*reply) && !call->retried) {
        call->retried = true;
        metrics::record_link_error(LinkError::kNoScript);

        if (call->flusher->send(call, true)) {
            return;
        }
    }

    if (reply == nullptr || reply->type == Reply::Type::kError) {
        metrics::record_link_error(LinkError::kTopDropped);
    }

    if (reply != nullptr && reply->type == Reply::Type::kError
        && call->flusher->link_->may_log())
    {
        LoggedText error(reply->text);
        ngx_log_error(NGX_LOG_WARN, call->flusher->log_, 0,
                      "ratelimit: redis answered an error to the top "
                      "subjects' flush: %V", error.str());
    }

    delete call;
}

}  // namespace ratelimit
