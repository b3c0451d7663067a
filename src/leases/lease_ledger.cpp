#include "leases/lease_ledger.hpp"

namespace ratelimit {

LeaseTake LeaseLedger::take(std::uint64_t cost, std::uint64_t now_ms,
                            std::uint64_t limit, std::uint64_t servers)
{
    LeaseTake result{LeaseTake::Kind::kTaken, 0, expire(now_ms)};

    if (cost <= s_.units) {
        note(cost, now_ms);
        s_.units -= cost;
        result.ask = ask_for(s_.units, true, now_ms, limit, servers);
        if (result.ask > 0) {
            result.kind = LeaseTake::Kind::kRenewAndTaken;
        }
        return result;
    }

    if (s_.asked > 0 && s_.units + s_.asked >= cost) {
        result.kind = LeaseTake::Kind::kWaitRenewal;
        return result;
    }

    note(cost, now_ms);
    result.kind = LeaseTake::Kind::kAskExact;
    result.ask = ask_for(s_.units, false, now_ms, limit, servers);
    return result;
}

void LeaseLedger::note(std::uint64_t cost, std::uint64_t now_ms)
{
    std::uint64_t elapsed = s_.seen && now_ms > s_.last_ms
                                ? now_ms - s_.last_ms
                                : 0;

    s_.rate = rate_observe(s_.rate, elapsed, cost, params_.rate_tau_ms);
    s_.last_ms = now_ms;
    s_.seen = 1;
}

// The renewal to send now, topping the lease up to the size: none while
// one is in flight, none above the low-water mark (when asked for), none
// in exact mode (cap 0).  Records it as in flight.
std::uint64_t LeaseLedger::ask_for(std::uint64_t held, bool at_low_water,
                                   std::uint64_t now_ms, std::uint64_t limit,
                                   std::uint64_t servers)
{
    if (s_.asked > 0) {
        return 0;
    }

    Override in_force = override_at(now_ms);
    std::uint64_t cap = lease_cap(in_force.set ? in_force.limit : limit,
                                  s_.fleet_used, servers, params_.share_k);
    std::uint64_t size = lease_size(s_.rate,
                                    lease_horizon_ms(params_, rtt_ms()),
                                    cap, params_.min_demand);

    if (size <= held) {
        return 0;
    }

    if (at_low_water
        && held > lease_low_water(s_.rate, params_, rtt_ms(), size))
    {
        return 0;
    }

    s_.asked = size - held;
    s_.sent_ms = now_ms;
    s_.cap = cap;
    return s_.asked;
}

LeaseReturn LeaseLedger::granted(std::uint64_t units, std::uint64_t bucket,
                                 std::uint64_t fleet_used,
                                 std::uint64_t left_ms, std::uint64_t now_ms,
                                 const Override &override)
{
    bool expected = s_.asked > 0;

    s_.fleet_used = fleet_used;
    if (!expected) {
        // Not dated by a send time: its end is not known.
        return LeaseReturn{units, bucket};
    }

    s_.asked = 0;
    note_override(override, s_.sent_ms);
    s_.rtt_ms = rtt_observe(rtt_ms(), now_ms > s_.sent_ms
                                          ? static_cast<double>(now_ms
                                                                - s_.sent_ms)
                                          : 0);
    if (units == 0) {
        return LeaseReturn{0, 0};
    }

    std::uint64_t end_ms = s_.sent_ms + left_ms;

    end_ms = end_ms > params_.guard_ms ? end_ms - params_.guard_ms : 0;

    if (end_ms <= now_ms) {
        return LeaseReturn{units, bucket};
    }

    if (s_.units > 0 && s_.bucket == bucket) {
        // Redis's clock was in the bucket at the grant: the later end holds.
        s_.units += units;
        s_.end_ms = end_ms > s_.end_ms ? end_ms : s_.end_ms;
        return LeaseReturn{0, 0};
    }

    LeaseReturn replaced{s_.units, s_.bucket};

    s_.units = units;
    s_.bucket = bucket;
    s_.end_ms = end_ms;
    return replaced;
}

void LeaseLedger::counted(std::uint64_t fleet_used, const Override &override,
                          std::uint64_t sent_ms)
{
    s_.fleet_used = fleet_used;
    note_override(override, sent_ms);
}

// Redis's time passes the override's end no earlier than sent_ms + left_ms
// by this clock (it told left_ms after the call left): so it is never
// taken as in force past its end.  A subject without one writes nothing.
void LeaseLedger::note_override(const Override &override,
                                std::uint64_t sent_ms)
{
    if (!override.set) {
        forget_override();
        return;
    }

    s_.override_limit = override.limit + 1;
    s_.override_window_ms = override.window_ms;
    s_.override_end_ms = override.left_ms > 0 ? sent_ms + override.left_ms
                                              : 0;
}

Override LeaseLedger::override_at(std::uint64_t now_ms)
{
    if (s_.override_limit == 0) {
        return {};
    }

    if (s_.override_end_ms != 0 && now_ms >= s_.override_end_ms) {
        forget_override();
        return {};
    }

    return {true, s_.override_limit - 1, s_.override_window_ms,
            s_.override_end_ms != 0 ? s_.override_end_ms - now_ms : 0};
}

LeaseReturn LeaseLedger::expire(std::uint64_t now_ms)
{
    if (s_.units == 0) {
        return LeaseReturn{0, 0};
    }

    bool quiet = now_ms >= s_.last_ms
                 && now_ms - s_.last_ms >= params_.idle_ms;

    if (now_ms < s_.end_ms && !quiet) {
        return LeaseReturn{0, 0};
    }

    return release();
}

LeaseReturn LeaseLedger::release()
{
    LeaseReturn back{s_.units, s_.bucket};

    s_.units = 0;
    return back;
}

}  // namespace ratelimit
