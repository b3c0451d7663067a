#include "rate/forgive_listener.hpp"

#include <new>

#include "limits/deny_cache.hpp"
#include "local/local_memory.hpp"
#include "scripts/forgive_call.hpp"
#include "scripts/override_call.hpp"

namespace ratelimit {

ForgiveListener::ForgiveListener(RedisLink *link, const ngx_str_t &prefix,
                                 const ngx_str_t &wake_key,
                                 DenyCache *denied, ngx_shm_zone_t *local,
                                 ForgivenHook leases, ngx_log_t *log) noexcept
    : link_(link), denied_(denied), local_(local), leases_(leases), log_(log)
{
    try {
        channel_.assign(view(prefix));
        channel_ += kForgiveChannelSuffix;
        wake_key_.assign(view(wake_key));
    } catch (...) {
        channel_.clear();
    }
}

ForgiveListener::~ForgiveListener()
{
    delete subscriber_;
}

bool ForgiveListener::subscribe() noexcept
{
    if (channel_.empty()) {
        return false;
    }

    subscriber_ = new (std::nothrow) RedisSubscriber(
        link_, channel_, on_message, on_change, this, log_);
    return subscriber_ != nullptr;
}

bool ForgiveListener::forgive(std::string_view key, std::string_view side,
                              std::string_view marker,
                              RedisConnection::ReplyHandler answered,
                              void *data) noexcept
{
    std::string command;

    try {
        command = format_forgive_call(key, channel_,
                                      forgive_message(key, wake_key_,
                                                      wall_clock_ms()),
                                      side, marker);
    } catch (...) {
        return false;
    }

    return send(key, command, answered, data);
}

bool ForgiveListener::set_override(std::string_view key,
                                   std::string_view side,
                                   std::string_view marker,
                                   const OverrideChange &change,
                                   RedisConnection::ReplyHandler answered,
                                   void *data) noexcept
{
    std::string command;

    try {
        command = format_override_call(
            side, marker, channel_,
            forgive_message(key, wake_key_, wall_clock_ms()), change);
    } catch (...) {
        return false;
    }

    return send(side, command, answered, data);
}

// Sends `command`, made for the node of `key`; false if it was not made
// (no memory) or cannot be sent.
bool ForgiveListener::send(std::string_view key, const std::string &command,
                           RedisConnection::ReplyHandler answered,
                           void *data) noexcept
{
    return !command.empty() && link_->up()
           && link_->send_for_key(key, command, answered, data);
}

void ForgiveListener::on_message(void *data, std::string_view message) noexcept
{
    auto *listener = static_cast<ForgiveListener *>(data);
    std::string_view key = forgiven_key(message, listener->wake_key_,
                                        wall_clock_ms());

    if (!key.empty()) {
        listener->denied_->forget(key, ngx_current_msec);

        if (listener->local_ != nullptr) {
            local::forget_override(listener->local_, key);
        }

        if (listener->leases_.forgiven != nullptr) {
            listener->leases_.forgiven(listener->leases_.data, key);
        }

        return;
    }

    if (listener->link_->may_log()) {
        ngx_log_error(NGX_LOG_WARN, listener->log_, 0,
                      "ratelimit: ignored a message on \"%s\" that is not "
                      "a forgiving signed with this fleet's secret",
                      listener->channel_.c_str());
    }
}

void ForgiveListener::on_change(void *data) noexcept
{
    auto *listener = static_cast<ForgiveListener *>(data);
    bool subscribed = listener->subscriber_ != nullptr
                      && listener->subscriber_->subscribed();

    // Lost (Redis gone, most often): the bans remembered stay, refused
    // till their end (limits/deny_cache.hpp); subscribed again, forgotten
    // too, as a lift may have been missed.
    listener->denied_->clear(ngx_current_msec, !subscribed);

    // Subscribed again: a removal may have been missed.  Not as it is lost
    // (Redis gone), when fail local needs them most.
    if (listener->local_ != nullptr && subscribed) {
        local::forget_overrides(listener->local_);
    }
}

}  // namespace ratelimit
