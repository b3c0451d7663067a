#include "rate/call_batch.hpp"

#include <new>

#include "cluster/cluster_slot.hpp"
#include "metrics/metrics.hpp"
#include "redis/decide_probe.hpp"
#include "redis/redis_connection.hpp"
#include "redis/redis_link.hpp"
#include "request/request_state.hpp"
#include "scripts/decide_command.hpp"
#include "scripts/window_script.hpp"

namespace ratelimit {

std::string_view request_zone_args(const RequestState *state, ngx_uint_t i,
                                   std::uint64_t wall_ms,
                                   char (&out)[kZoneArgsMaxSize]) noexcept
{
    const Zone &zone = *state->refs[i]->zone;

    if (zone.script_args.len > 0) {
        return view(zone.script_args);
    }

    return {out, write_zone_args(call_policy_of(state, i, wall_ms), out)};
}

void tell_link_of_script_error(RedisLink *link,
                               std::string_view error) noexcept
{
    if (error.find("non local key") != std::string_view::npos) {
        link->slot_map_stale();
    }

    link->on_error_reply(error);
}

CallBatcher::CallBatcher(RedisLink *link, const RedisTarget &target,
                         const BatchSink &sink, ngx_log_t *log) noexcept
    : link_(link), cross_slot_(target.cluster && target.cross_slot),
      packed_(target.packed), sink_(sink),
      settles_({send_held, this}, target.timeout, log)
{
    init_event(&turn_end_, on_turn_end, this, log);
    link->on_up(on_link_up, this);
}

void CallBatcher::on_link_up(void *data) noexcept
{
    auto *batcher = static_cast<CallBatcher *>(data);
    std::string_view script = window_script();
    const char *ping[1] = {"PING"};
    size_t ping_len[1] = {4};
    const char *argv[3] = {"SCRIPT", "LOAD", script.data()};
    size_t lens[3] = {6, 4, script.size()};

    // PING first: a Redis that wants a password the configuration lacks
    // answers it NOAUTH, where the script, longer than the 16 KB Redis 7
    // takes from a client that has not authenticated, would get "Protocol
    // error: unauthenticated bulk length" and the connection dropped.
    if (!batcher->link_->send_argv(1, ping, ping_len, on_ping_reply, batcher)
        || !batcher->link_->send_argv(3, argv, lens, on_script_loaded,
                                      batcher))
    {
        batcher->link_->reconnect();
        return;
    }

    batcher->send_waiting_settles();
}

void CallBatcher::on_ping_reply(void *data, const Reply *reply) noexcept
{
    static_cast<CallBatcher *>(data)->refused("PING", reply);
}

void CallBatcher::on_script_loaded(void *data, const Reply *reply) noexcept
{
    static_cast<CallBatcher *>(data)->refused("SCRIPT LOAD", reply);
}

void CallBatcher::refused(const char *command, const Reply *reply) noexcept
{
    if (reply == nullptr || reply->type != Reply::Type::kError) {
        return;
    }

    metrics::record_link_error(LinkError::kErrorReply);

    if (link_->may_log()) {
        LoggedText error(reply->text);
        ngx_log_error(NGX_LOG_ERR, turn_end_.log, 0,
                      "ratelimit: redis at \"%V\" refused %s: %V",
                      &link_->server(), command, error.str());
    }

    link_->reconnect();
}

void CallBatcher::on_batch_reply(void *data, const Reply *reply) noexcept
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
    // them, but none may keep a pointer to them either.  The settles and
    // renewals never sent are dropped (the settles waiting for the link, by
    // the queue).
    for (ngx_uint_t b = 0; b < open_count_; b++) {
        for (ngx_uint_t i = 0; i < open_[b]->call.entries(); i++) {
            if (RequestState *state = open_[b]->states[i]) {
                state->part[open_[b]->parts[i]].batch = nullptr;
            }

            if (Settle *settle = open_[b]->settles[i]) {
                settles_.end(settle, SettleOutcome::kDropped);
            }

            if (LeaseRenewal *renewal = open_[b]->renewals[i]) {
                fail_renewal(renewal);
            }
        }

        delete open_[b];
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

    // One part per slot of its keys (per master with cross_slot); every
    // key in slot 0 but in a cluster.
    bool clustered = link_->clustered();
    state->parts = 0;
    state->part_failed = false;

    for (ngx_uint_t i = 0; i < state->zones; i++) {
        std::uint16_t slot = clustered ? key_slot(view(state->keys[i])) : 0;
        std::uint32_t group = group_of(slot);
        ngx_uint_t p = 0;

        while (p < state->parts && state->part[p].group != group) {
            p++;
        }

        if (p == state->parts) {
            state->part[p] = {};
            state->part[p].group = group;
            state->part[p].slot = slot;
            state->parts++;
        }

        state->part[p].zone[state->part[p].zones++] =
            static_cast<std::uint8_t>(i);
    }

    // Counted down as parts are answered, from the first: a full batch is
    // sent, and may fail, while the next part is being added.
    state->parts_waiting = state->parts;
    state->release_hook = forget;

    for (ngx_uint_t p = 0; p < state->parts; p++) {
        if (!add_part(state, p)) {
            forget(state);
            return QueueResult::kNoMemory;
        }
    }

    return QueueResult::kQueued;
}

bool CallBatcher::add_part(RequestState *state, ngx_uint_t p) noexcept
{
    RequestState::Part &part = state->part[p];
    Batch *batch = open_for(part.group, part.slot);

    if (batch != nullptr && !batch->call.has_room(part.zones)) {
        send_batch(batch);
        batch = open_for(part.group, part.slot);
    }

    if (batch == nullptr || !fill(batch, state, p)) {
        return false;
    }

    if (batch->call.entries() == Batch::kMaxRequests) {
        send_batch(batch);
    } else if (!turn_end_.posted) {
        ngx_post_event(&turn_end_, &ngx_posted_events);
    }

    return true;
}

// Adds part p of the request to the batch; false, with the batch as it
// was, on no memory.
bool CallBatcher::fill(Batch *batch, RequestState *state, ngx_uint_t p) noexcept
{
    RequestState::Part &part = state->part[p];
    std::string_view keys[kMaxZonesPerRequest];
    std::string_view args[kMaxZonesPerRequest];
    bool enforce[kMaxZonesPerRequest];
    std::uint64_t buckets[kMaxZonesPerRequest];
    std::uint64_t costs[kMaxZonesPerRequest];
    ZoneSide sides[kMaxZonesPerRequest];
    // A zone whose limit is a variable: its arguments under the request's
    // limit (the batch copies them, or finds them among its zones).
    char made[kMaxZonesPerRequest][kZoneArgsMaxSize];
    char tag[kSlotTagMaxSize];

    for (ngx_uint_t j = 0; j < part.zones; j++) {
        ngx_uint_t i = part.zone[j];
        keys[j] = view(state->keys[i]);
        args[j] = request_zone_args(state, i, state->asked_ms, made[j]);
        enforce[j] = enforced(state, i);
        buckets[j] = state->interval_buckets ? state->interval_buckets[i] : 0;
        costs[j] = state->costs[i];
        sides[j] = side_of(*state->refs[i]->zone, batch->slot, tag);
    }

    ngx_uint_t entry = batch->call.entries();

    if (!batch->call.add(state->peek, part.zones, keys, args, enforce,
                         state->interval_buckets ? buckets : nullptr,
                         state->peek ? nullptr : costs, sides))
    {
        return false;
    }

    batch->states[entry] = state;
    batch->settles[entry] = nullptr;
    batch->renewals[entry] = nullptr;
    batch->parts[entry] = static_cast<std::uint8_t>(p);
    part.batch = batch;
    part.entry = entry;
    in_flight_++;
    metrics::record_requests_waiting(in_flight_);
    return true;
}

// The side keys of `zone` in a batch to `slot`: none for a zone that reads
// no overrides nor bans; its ban's length (ScriptBatch sends it only for
// an enforced zone); its marker's tail, in `tag`, the slot's hash tag in a
// cluster but with cross_slot (whose calls name no markers).
ZoneSide CallBatcher::side_of(const Zone &zone, std::uint16_t slot,
                              char (&tag)[kSlotTagMaxSize]) const noexcept
{
    if (zone.side_base.len == 0) {
        return {};
    }

    std::size_t n = link_->clustered() && !cross_slot_
                    ? write_slot_tag(slot, tag) : 0;
    return {view(zone.side_base), {tag, n}, zone.ban_ms};
}

// Sends an open batch before the loop turn ends.
void CallBatcher::send_batch(Batch *batch) noexcept
{
    for (ngx_uint_t b = 0; b < open_count_; b++) {
        if (open_[b] == batch) {
            send_open(b);
            return;
        }
    }
}

// The batch being filled for `group`, or a new one, sent to `slot`.
Batch *CallBatcher::open_for(std::uint32_t group, std::uint16_t slot) noexcept
{
    for (ngx_uint_t b = 0; b < open_count_; b++) {
        if (open_[b]->group == group) {
            return open_[b];
        }
    }

    if (open_count_ == kMaxOpen) {
        send_all();
    }

    Batch *batch = free_;

    if (batch != nullptr) {
        free_ = batch->next_free;
        free_count_--;
    } else {
        batch = new (std::nothrow) Batch();

        if (batch == nullptr) {
            return nullptr;
        }

        batch->owner = this;
    }

    batch->group = group;
    batch->slot = slot;
    batch->hold = hold_index(group);
    batch->counted = false;
    batch->due = false;
    batch->settle_count = 0;
    open_[open_count_++] = batch;
    return batch;
}

void CallBatcher::forget(RequestState *state) noexcept
{
    for (ngx_uint_t p = 0; p < state->parts; p++) {
        RequestState::Part &part = state->part[p];

        if (part.batch != nullptr) {
            part.batch->states[part.entry] = nullptr;
            part.batch = nullptr;
        }
    }
}

// Hands open batch i to the link.  The batch may be answered (with NULL, if
// the write fails) and released before send() returns.
void CallBatcher::send_open(ngx_uint_t i) noexcept
{
    Batch *batch = open_[i];
    open_[i] = open_[--open_count_];

    if (open_count_ == 0 && turn_end_.posted) {
        ngx_delete_posted_event(&turn_end_);
    }

    if (!compact(batch)) {
        return;
    }

    if (batch->hold >= 0) {
        calls_out_[batch->hold]++;
        batch->counted = true;
    }

    // The module's command declares its keys: never for a cross-slot call.
    bool command = link_->has_module_command(batch->slot) && !cross_slot_;
    ScriptBatch::Form form = command ? ScriptBatch::Form::kDecideCommand
                                     : ScriptBatch::Form::kEvalSha;

    if (const char *failure = send(batch, form)) {
        fail_all(batch, failure, {}, SettleFate::kRequeue);
    }
}

// Leaves out of a batch about to be sent the requests that stopped waiting
// while it was held: Redis would count them, though they got the fail
// policy.  False if none is left (the batch is released).
bool CallBatcher::compact(Batch *batch) noexcept
{
    RequestState *states[Batch::kMaxRequests];
    Settle *settles[Batch::kMaxRequests];
    LeaseRenewal *renewals[Batch::kMaxRequests];
    std::uint8_t parts[Batch::kMaxRequests];
    ngx_uint_t n = 0;
    ngx_uint_t entries = batch->call.entries();

    for (ngx_uint_t i = 0; i < entries; i++) {
        if (batch->states[i] != nullptr || batch->settles[i] != nullptr
            || batch->renewals[i] != nullptr)
        {
            states[n] = batch->states[i];
            settles[n] = batch->settles[i];
            renewals[n] = batch->renewals[i];
            parts[n++] = batch->parts[i];
        }
    }

    if (n == entries) {
        return true;
    }

    if (n == 0) {
        release(batch);
        return false;
    }

    in_flight_ -= entries - batch->settle_count;
    batch->settle_count = 0;
    batch->call.clear();

    for (ngx_uint_t k = 0; k < n; k++) {
        if (settles[k] != nullptr) {
            if (!fill_call(batch, settles[k])) {
                settles_.end(settles[k], SettleOutcome::kDropped);
            }
        } else if (renewals[k] != nullptr) {
            if (!fill_call(batch, renewals[k])) {
                fail_renewal(renewals[k]);
            }
        } else if (!fill(batch, states[k], parts[k])) {
            states[k]->part[parts[k]].batch = nullptr;
            sink_.part_failed(states[k], "no memory for the call to redis",
                              {});
        }
    }

    if (batch->call.entries() == 0) {
        release(batch);
        return false;
    }

    return true;
}

// What a batch is for: the keys of one slot, or with cross_slot of one
// master.
std::uint32_t CallBatcher::group_of(std::uint16_t slot) const noexcept
{
    return cross_slot_ ? kClusterSlots + link_->master_index(slot) : slot;
}

// Which count of calls in flight holds back a batch for `group`, or -1:
// where a group is one connection (one server, or a master with
// cross_slot), for the first kMaxHeld masters.
int CallBatcher::hold_index(std::uint32_t group) const noexcept
{
    if (!link_->clustered()) {
        return 0;
    }

    std::uint32_t node = group - kClusterSlots;

    return cross_slot_ && node < kMaxHeld ? static_cast<int>(node)
                                                  : -1;
}

// An open batch waits for a reply of its connection: kMaxCallsOut calls
// are in flight on it, or some are and the batch is too small to be
// pipelined and has not yet seen one of them answered.
bool CallBatcher::held(const Batch *batch) const noexcept
{
    if (batch->hold < 0 || calls_out_[batch->hold] == 0) {
        return false;
    }

    return calls_out_[batch->hold] >= kMaxCallsOut
           || (batch->call.entries() < kMinPipelined && !batch->due);
}

// At the end of a loop turn: the open batches not held().  The others fill
// until a reply of their connection comes back, or they are full.
void CallBatcher::send_ready() noexcept
{
    for (ngx_uint_t b = open_count_; b-- > 0; /* void */) {
        if (b < open_count_ && !held(open_[b])) {
            send_open(b);
        }
    }
}

void CallBatcher::send_all() noexcept
{
    while (open_count_ > 0) {
        send_open(open_count_ - 1);
    }
}

// hiredis copies the command: one buffer serves every batch.  Returns what
// went wrong, or nullptr once the batch is sent.
const char *CallBatcher::send(Batch *batch, ScriptBatch::Form form) noexcept
{
    batch->form = form;

    if (!batch->call.write_command(form, &command_, cross_slot_, packed_)) {
        return "no memory for the call to redis";
    }

    // Before the send: a write that fails answers the batch, which may be
    // freed, before send_keyed() returns.  A call the link refuses is
    // counted all the same.  In a cluster, its redirects are followed as
    // long as some request of it still waits.
    batch->sent_us = metrics::record_call_sent(batch->call.entries());

    if (!link_->send_keyed(batch->slot, command_, on_batch_reply, waited,
                           batch))
    {
        return "redis is not connected";
    }

    return nullptr;
}

void CallBatcher::on_turn_end(ngx_event_t *ev) noexcept
{
    static_cast<CallBatcher *>(ev->data)->send_ready();
}

void CallBatcher::on_reply(Batch *batch, const Reply *reply) noexcept
{
    metrics::record_call_answered(reply != nullptr, batch->sent_us);

    const ScriptBatch &call = batch->call;
    BatchReply decoded = decode_batch_reply(reply, call.reply_elements(),
                                            call.entries(), call.sided());

    switch (decoded.kind) {
    case BatchReply::Kind::kReplies:
        for (ngx_uint_t i = 0, told = 0; i < call.entries(); i++) {
            RequestState *state = batch->states[i];
            const Reply *part = reply->element + call.reply_offset(i);
            Told its = told_of(decoded.told, i, &told);

            if (state != nullptr) {
                state->part[batch->parts[i]].batch = nullptr;
                sink_.take_reply(state, batch->parts[i], decoded.now_ms,
                                 part, its);
            } else if (batch->settles[i] != nullptr) {
                settles_.take_reply(batch->settles[i], part);
            } else if (batch->renewals[i] != nullptr) {
                take_renewal_reply(batch->renewals[i], decoded.now_ms, part,
                                   its);
                settles_.let_go();
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
                     decoded.error, SettleFate::kRequeue);
        }
        return;

    case BatchReply::Kind::kError:
        // The module unloaded, or replaced by an older release's, which
        // refuses this release's number of zones or a zone that bans
        // before any key: the command ran nothing, the script can.  Never
        // on any other error: the call may have counted.
        if (batch->form == ScriptBatch::Form::kDecideCommand
            && (is_unknown_command(decoded.error)
                || decoded.error == kZoneCountRefused
                || decoded.error == kZoneModeRefused))
        {
            link_->module_command_lost(batch->slot);

            if (resend_as_script(batch)) {
                return;
            }
        }

        metrics::record_link_error(LinkError::kErrorReply);
        fail_all(batch, "redis answered an error: ", decoded.error,
                 SettleFate::kRefused);
        tell_link_of_script_error(link_, decoded.error);
        return;

    case BatchReply::Kind::kMalformed:
        fail_all(batch, reply == nullptr ? "redis connection failed"
                                         : "unexpected reply from redis",
                 {}, SettleFate::kUnknown);
        return;
    }
}

// Some request of the batch still waits for it, or it holds a settle.  A
// batch sent again when none does would count requests already given the
// fail policy.
bool CallBatcher::waited(void *data) noexcept
{
    auto *batch = static_cast<const Batch *>(data);

    if (batch->settle_count > 0) {
        return true;
    }

    for (ngx_uint_t i = 0; i < batch->call.entries(); i++) {
        if (batch->states[i] != nullptr) {
            return true;
        }
    }

    return false;
}

// A batch Redis refused without running anything, sent once more as EVAL,
// unless it was already.  False if it was, or could not be sent.
bool CallBatcher::resend_as_script(Batch *batch) noexcept
{
    if (batch->form == ScriptBatch::Form::kEval) {
        return false;
    }

    if (!waited(batch)) {
        release(batch);
        return true;
    }

    return send(batch, ScriptBatch::Form::kEval) == nullptr;
}

void CallBatcher::fail_all(Batch *batch, const char *why,
                           std::string_view detail, SettleFate fate) noexcept
{
    for (ngx_uint_t i = 0; i < batch->call.entries(); i++) {
        RequestState *state = batch->states[i];
        Settle *settle = batch->settles[i];

        if (state != nullptr) {
            state->part[batch->parts[i]].batch = nullptr;
            sink_.part_failed(state, why, detail);
        } else if (batch->renewals[i] != nullptr) {
            fail_renewal(batch->renewals[i]);
        } else if (settle != nullptr && fate == SettleFate::kUnknown) {
            settles_.end(settle, SettleOutcome::kUnknown);
        } else if (settle != nullptr && fate == SettleFate::kRefused
                   && ++settle->refusals == kMaxRefusals)
        {
            settles_.end(settle, SettleOutcome::kFailed);
        } else if (settle != nullptr) {
            settles_.wait(settle);
        }
    }

    release(batch);
}

void CallBatcher::release(Batch *batch) noexcept
{
    in_flight_ -= batch->call.entries() - batch->settle_count;
    batch->settle_count = 0;
    metrics::record_requests_waiting(in_flight_);

    // The batch held back behind this call goes at the end of this turn.
    if (batch->counted) {
        calls_out_[batch->hold]--;

        for (ngx_uint_t b = 0; b < open_count_; b++) {
            if (open_[b]->hold == batch->hold) {
                open_[b]->due = true;

                if (!turn_end_.posted) {
                    ngx_post_event(&turn_end_, &ngx_posted_events);
                }
            }
        }
    }

    batch->counted = false;

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
