// The batcher's calls of no request: settles (rate/settle_queue.hpp) and
// lease renewals (rate/lease_renewals.hpp) put into the open batches of
// their keys' connections, and the settles the queue holds sent.
#include "rate/call_batch.hpp"

#include "cluster/cluster_slot.hpp"
#include "limits/calendar_zone.hpp"
#include "redis/redis_link.hpp"

namespace ratelimit {

namespace {

// Entry `entry` of the batch, just added, is a settle or a renewal.
void note_entry(Batch *batch, ngx_uint_t entry, Settle *settle,
                LeaseRenewal *renewal)
{
    batch->states[entry] = nullptr;
    batch->settles[entry] = settle;
    batch->renewals[entry] = renewal;
    batch->settle_count++;
}

// The settle's script arguments, made as it is sent: its zone's own, or
// written with its policy, a calendar zone's in the periods of nginx's
// clock now, of which Redis's clock picks one.  So a settle that waited
// (for the link, or after a call refused) counts in its request's period
// while Redis's clock is in it, and nowhere once it has ended, however
// long it waited and whatever nginx's clock says; it never names periods
// Redis's clock is past, which would refuse the whole call.
std::string_view settle_args(const Settle &settle,
                             char (&out)[kZoneArgsMaxSize])
{
    const Zone &zone = *settle.zone;

    if (zone.script_args.len > 0) {
        return view(zone.script_args);
    }

    Policy policy = settle.policy;

    if (zone.calendar != nullptr) {
        zone.calendar->make_call(&policy, wall_clock_ms());
    }

    return {out, write_zone_args(policy, out)};
}

// Whether a calendar zone's call made now names two periods neither of
// which is the settle's bucket's: Redis, whichever its clock chose, would
// apply nothing (its period ended more than half a period ago).
bool outdated(const Settle &settle)
{
    if (settle.zone->calendar == nullptr) {
        return false;
    }

    Policy now = policy_at(*settle.zone, wall_clock_ms());
    std::uint64_t first_end = now.periods.first_end_ms;

    return settle.bucket != calendar_bucket_at(now, first_end - 1).number
           && settle.bucket != calendar_bucket_at(now, first_end).number;
}

}  // namespace

void CallBatcher::settle(std::string_view key, const Policy &policy,
                         std::int64_t units, std::uint64_t bucket,
                         const Zone &zone) noexcept
{
    Settle *settle = make_settle(key, policy, units, bucket, zone);

    if (settle == nullptr) {
        return;
    }

    // The batcher owns the settle from here.
    settle->slot = link_->clustered() ? key_slot(settle->key) : 0;
    settles_.hold();

    if (!link_->up() || !add_call(settle)) {
        settles_.wait(settle);
    }
}

void CallBatcher::renew_lease(std::string_view key,
                              std::string_view zone_args,
                              std::uint64_t made_ms, std::uint64_t asked,
                              const Zone &zone, LeaseRenewed renewed) noexcept
{
    LeaseRenewal *renewal = make_renewal(key, zone_args, made_ms, asked,
                                         zone, renewed);

    if (renewal == nullptr) {
        return;
    }

    // The batcher owns the renewal from here.
    renewal->slot = link_->clustered() ? key_slot(renewal->key) : 0;
    settles_.hold();

    if (!link_->up() || !add_call(renewal)) {
        fail_renewal(renewal);
    }
}

// Adds a settle or a renewal to the open batch of its key's connection;
// false, with the batch as it was, on no memory.
template <typename Call>
bool CallBatcher::add_call(Call *call) noexcept
{
    std::uint32_t group = group_of(call->slot);
    Batch *batch = open_for(group, call->slot);

    if (batch != nullptr && !batch->call.has_room(1)) {
        send_batch(batch);
        batch = open_for(group, call->slot);
    }

    if (batch == nullptr || !fill_call(batch, call)) {
        return false;
    }

    if (batch->call.entries() == Batch::kMaxRequests
        || settles_.draining())
    {
        send_batch(batch);
    } else if (!turn_end_.posted) {
        ngx_post_event(&turn_end_, &ngx_posted_events);
    }

    return true;
}

bool CallBatcher::fill_call(Batch *batch, Settle *settle) noexcept
{
    ngx_uint_t entry = batch->call.entries();
    char tag[kSlotTagMaxSize];
    char made[kZoneArgsMaxSize];

    if (!batch->call.add_settle(settle->key, settle_args(*settle, made),
                                settle->units, settle->bucket,
                                side_of(*settle->zone, batch->slot, tag)))
    {
        return false;
    }

    note_entry(batch, entry, settle, nullptr);
    return true;
}

bool CallBatcher::fill_call(Batch *batch, LeaseRenewal *renewal) noexcept
{
    ngx_uint_t entry = batch->call.entries();
    char tag[kSlotTagMaxSize];

    if (!add_renewal(&batch->call, *renewal,
                     side_of(*renewal->zone, batch->slot, tag)))
    {
        return false;
    }

    note_entry(batch, entry, nullptr, renewal);
    return true;
}

// A renewal that cannot be sent, or whose outcome is not known, fails: it
// never waits for the link (its lease would be stale) nor is resent.
void CallBatcher::fail_renewal(LeaseRenewal *renewal) noexcept
{
    end_renewal(renewal, nullptr);
    settles_.let_go();
}

void CallBatcher::send_waiting_settles() noexcept
{
    Settle *list = settles_.take_waiting();

    while (list != nullptr) {
        Settle *settle = list;
        list = list->next;

        if (outdated(*settle)) {
            settles_.end(settle, SettleOutcome::kDropped);
        } else if (!add_call(settle)) {
            settles_.wait(settle);
        }
    }
}

// The drain's: see SettleQueue::Sender.
void CallBatcher::send_held(void *data, bool exiting) noexcept
{
    auto *batcher = static_cast<CallBatcher *>(data);

    if (batcher->link_->up()) {
        batcher->send_waiting_settles();
    }

    if (exiting) {
        batcher->send_all();
    }
}

}  // namespace ratelimit
