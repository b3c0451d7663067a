#include "call_batch.hpp"

#include <new>

#include "metrics.hpp"
#include "redis_link.hpp"
#include "request_state.hpp"
#include "script_call.hpp"
#include "window_script.hpp"

namespace ratelimit {

CallBatcher::CallBatcher(RedisLink *link, ngx_log_t *log) noexcept
    : link_(link)
{
    ngx_memzero(&turn_end_, sizeof(ngx_event_t));
    turn_end_.handler = on_turn_end;
    turn_end_.data = this;
    turn_end_.log = log;
    link->on_up(on_link_up, this);
}

void CallBatcher::on_link_up(void *data) noexcept
{
    auto *batcher = static_cast<CallBatcher *>(data);
    std::string_view script = window_script();
    const char *argv[3] = {"SCRIPT", "LOAD", script.data()};
    size_t lens[3] = {6, 4, script.size()};

    if (!batcher->link_->send_argv(3, argv, lens, on_script_loaded,
                                   batcher)
        || !batcher->probe_.ask(batcher->link_, batcher->turn_end_.log))
    {
        batcher->link_->reconnect();
    }
}

void CallBatcher::on_script_loaded(void *data,
                                   const redisReply *reply) noexcept
{
    auto *batcher = static_cast<CallBatcher *>(data);

    if (reply == nullptr || reply->type != REDIS_REPLY_ERROR) {
        return;
    }

    metrics::record_link_error(LinkError::kErrorReply);

    if (batcher->link_->may_log()) {
        ngx_log_error(NGX_LOG_ERR, batcher->turn_end_.log, 0,
                      "ratelimit: redis at \"%V\" refused SCRIPT LOAD: %*s",
                      &batcher->link_->server(),
                      static_cast<size_t>(reply->len), reply->str);
    }

    batcher->link_->reconnect();
}

void CallBatcher::on_batch_reply(void *data, const redisReply *reply) noexcept
{
    auto *batch = static_cast<Batch *>(data);
    batch->owner->on_reply(batch, reply);
}

CallBatcher::~CallBatcher()
{
    if (turn_end_.posted) {
        ngx_delete_posted_event(&turn_end_);
    }

    // Only when the worker exits, after every request: none can be left in
    // it, but none may keep a pointer to it either.
    if (open_ != nullptr) {
        for (ngx_uint_t i = 0; i < open_->call.entries(); i++) {
            if (open_->states[i] != nullptr) {
                open_->states[i]->batch = nullptr;
            }
        }

        delete open_;
    }

    while (free_ != nullptr) {
        Batch *next = free_->next_free;
        delete free_;
        free_ = next;
    }
}

CallBatcher::QueueResult CallBatcher::queue(RequestState *state) noexcept
{
    if (!link_->up()) {
        return QueueResult::kDown;
    }

    if (in_flight_ >= kMaxInFlight) {
        return QueueResult::kSaturated;
    }

    if (open_ == nullptr) {
        open_ = free_;

        if (open_ != nullptr) {
            free_ = open_->next_free;
            free_count_--;
        } else {
            open_ = new (std::nothrow) Batch();

            if (open_ == nullptr) {
                return QueueResult::kNoMemory;
            }

            open_->owner = this;
        }

    }

    std::string_view keys[kMaxZonesPerRequest];
    std::string_view args[kMaxZonesPerRequest];
    bool enforce[kMaxZonesPerRequest];

    for (ngx_uint_t i = 0; i < state->zones; i++) {
        keys[i] = view(state->keys[i]);
        args[i] = view(state->refs[i]->zone->script_args);
        enforce[i] = enforced(state, i);
    }

    ngx_uint_t slot = open_->call.entries();

    if (!open_->call.add(state->peek, state->zones, keys, args, enforce,
                         state->interval_buckets))
    {
        return QueueResult::kNoMemory;
    }

    open_->states[slot] = state;
    state->batch = open_;
    state->slot = slot;
    in_flight_++;
    metrics::record_requests_waiting(in_flight_);

    if (slot + 1 == Batch::kMaxRequests) {
        send_open();
    } else if (!turn_end_.posted) {
        ngx_post_event(&turn_end_, &ngx_posted_events);
    }

    return QueueResult::kQueued;
}

void CallBatcher::forget(RequestState *state) noexcept
{
    if (state->batch != nullptr) {
        state->batch->states[state->slot] = nullptr;
        state->batch = nullptr;
    }
}

// Hands the open batch to hiredis.  The batch may be answered (with NULL, if
// the write fails) and released before send() returns.
void CallBatcher::send_open() noexcept
{
    Batch *batch = open_;
    open_ = nullptr;

    if (turn_end_.posted) {
        ngx_delete_posted_event(&turn_end_);
    }

    ScriptBatch::Form form = probe_.available()
                                 ? ScriptBatch::Form::kDecideCommand
                                 : ScriptBatch::Form::kEvalSha;

    if (const char *failure = send(batch, form)) {
        fail_all(batch, failure, {});
    }
}

// hiredis copies the command: one buffer serves every batch.  Returns what
// went wrong, or nullptr once the batch is sent.
const char *CallBatcher::send(Batch *batch, ScriptBatch::Form form) noexcept
{
    batch->form = form;

    if (!batch->call.write_command(form, &command_)) {
        return "no memory for the call to redis";
    }

    if (!link_->send(command_, on_batch_reply, batch)) {
        return "redis is not connected";
    }

    metrics::record_call_sent(batch->call.entries());
    return nullptr;
}

void CallBatcher::on_turn_end(ngx_event_t *ev) noexcept
{
    auto *batcher = static_cast<CallBatcher *>(ev->data);

    if (batcher->open_ != nullptr) {
        batcher->send_open();
    }
}

void CallBatcher::on_reply(Batch *batch, const redisReply *reply) noexcept
{
    metrics::record_call_answered(reply != nullptr);

    const ScriptBatch &call = batch->call;
    BatchReply decoded = decode_batch_reply(reply, call.reply_elements());

    switch (decoded.kind) {
    case BatchReply::Kind::kReplies:
        for (ngx_uint_t i = 0; i < call.entries(); i++) {
            RequestState *state = batch->states[i];

            if (state != nullptr) {
                state->batch = nullptr;
                take_reply(state, decoded.now_ms,
                           reply->element + call.reply_offset(i));
            }
        }
        release(batch);
        return;

    case BatchReply::Kind::kNoScript:
        metrics::record_link_error(LinkError::kNoScript);
        // A Redis restarted or flushed behind our back: send the script
        // itself once, which also caches it for the calls that follow.
        if (!resend_as_script(batch)) {
            fail_all(batch, "redis does not have the script: ",
                     decoded.error);
        }
        return;

    case BatchReply::Kind::kError:
        // The module unloaded: the command ran nothing, the script can.
        if (batch->form == ScriptBatch::Form::kDecideCommand
            && decoded.error.substr(0, 19) == "ERR unknown command")
        {
            probe_.lost();

            if (resend_as_script(batch)) {
                return;
            }
        }

        metrics::record_link_error(LinkError::kErrorReply);
        fail_all(batch, "redis answered an error: ", decoded.error);
        link_->on_error_reply(decoded.error);
        return;

    case BatchReply::Kind::kMalformed:
        fail_all(batch, reply == nullptr ? "redis connection failed"
                                         : "unexpected reply from redis",
                 {});
        return;
    }
}

// A batch Redis refused without running anything, sent once more as EVAL,
// unless it was already.  False if it was, or could not be sent.
bool CallBatcher::resend_as_script(Batch *batch) noexcept
{
    return batch->form != ScriptBatch::Form::kEval
           && send(batch, ScriptBatch::Form::kEval) == nullptr;
}

void CallBatcher::fail_all(Batch *batch, const char *why,
                           std::string_view detail) noexcept
{
    for (ngx_uint_t i = 0; i < batch->call.entries(); i++) {
        RequestState *state = batch->states[i];

        if (state != nullptr) {
            state->batch = nullptr;
            fail_call(state, why, detail);
        }
    }

    release(batch);
}

void CallBatcher::release(Batch *batch) noexcept
{
    in_flight_ -= batch->call.entries();
    metrics::record_requests_waiting(in_flight_);

    if (free_count_ == kMaxFree) {
        delete batch;
        return;
    }

    batch->call.clear();
    batch->next_free = free_;
    free_ = batch;
    free_count_++;
}

}  // namespace ratelimit
