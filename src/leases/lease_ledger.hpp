// One subject's lease on one server (all its workers), as a state machine
// over a plain struct, so that it can live in nginx shared memory: fixed
// size, no pointers, trivially copyable; all zeros is the empty ledger.
//
// A lease is `units` that Redis has already counted, for this server, in
// bucket `bucket` of the subject's window.  The server admits requests
// against it with no Redis call.  Because the units were counted when they
// were granted, the fleet never admits more than the limit.
//
// Times are this server's monotonic clock in ms (`now_ms`), never Redis's:
// a lease may be used only while Redis's clock is in its bucket (units
// counted in bucket b used in b + 1 would leave the window a bucket before
// the admissions they paid for), and the server knows that without a
// shared clock: Redis granted after the renewal was sent, so Redis's clock
// reaches the bucket's end no earlier than sent_ms + left_ms, left_ms being
// what Redis said was left of the bucket when it granted.  Both clocks
// read whole ms, which can put that up to 1 ms late, so the lease dies at
//     end_ms = sent_ms + left_ms - guard_ms    (guard_ms >= 1).
// From end_ms on the lease is dead; its units go back (a settle of
// -units into its bucket, which does nothing once the bucket has left the
// window).  They also go back after idle_ms without a request.
//
// Invariant (the ledger tests hold it): units + asked <= cap, where asked
// is the renewal in flight and cap the cap of the last ask
// (lease_policy.hpp): every ask tops the lease up to at most the cap.  So
// a server holds at most floor(limit / (k * servers)) units, counted in
// Redis and not admitted, besides the give-backs it has sent.
//
// Under-admission bound.  Let q = floor(L / (k * S)) for limit L, k and
// the servers S the fleet counts.  H(t), the units counted in the window
// that no admission used, is at most
//     H(t) <= q * (S + G(t) + X(t))  <=  L / k + q * (G(t) + X(t))
// where G(t) is the give-backs sent and not yet applied (each at most one
// lease, applied one reply delay later) and X(t) the leases lost in the
// window: a grant whose reply never came (renewal_failed()), a server
// that crashed, a give-back lost on the way; each is lost until its bucket
// leaves the window.  A server quiet for idle_ms holds nothing.  When a
// request of cost c was refused by Redis at t (no give-back applied since
// in that bucket), the window's admissions at t are at least
//     L - (c - 1) - H(t).
// See README.md.
//
// A subject's override of its zone's limit (issue 41), as the replies to
// its renewals and exact requests tell it, replaces the limit its asks are
// sized by while it is in force: Redis grants under it, and the requests
// admitted from the lease report it.  A leased zone counts requests in a
// window: the override's limit replaces the zone's as it is.
#pragma once

#include <cstdint>
#include <type_traits>

#include "leases/lease_policy.hpp"
#include "limits/override.hpp"

namespace ratelimit {

struct LeaseState {
    std::uint64_t bucket;      // the lease's bucket, Redis's number
    std::uint64_t units;       // left in the lease
    std::uint64_t end_ms;      // from here on the lease may be past bucket
    std::uint64_t last_ms;     // the last request decided (rate, idle)
    std::uint64_t sent_ms;     // when the renewal in flight was asked
    std::uint64_t asked;       // units the renewal in flight asks; 0: none
    std::uint64_t cap;         // the cap of the last ask
    std::uint64_t fleet_used;  // the fleet's count, Redis's last reply
    double rate;               // units/ms (rate_observe())
    double rtt_ms;             // round trip; 0: not measured yet
    std::uint64_t seen;        // 1 once a request was decided
    // The subject's override as Redis last told it: its limit + 1 (0:
    // none), its window, and its end by this clock (0: it never lapses),
    // dated from when the call that told it left.
    std::uint64_t override_limit;
    std::uint64_t override_window_ms;
    std::uint64_t override_end_ms;
};

static_assert(std::is_trivially_copyable_v<LeaseState>);
static_assert(std::is_standard_layout_v<LeaseState>);

// Units to give back: a settle of -units into `bucket`; none if units is 0.
struct LeaseReturn {
    std::uint64_t units;
    std::uint64_t bucket;
};

struct LeaseTake {
    enum class Kind {
        kTaken,          // admitted from the lease
        kRenewAndTaken,  // admitted; send a renewal of `ask` units
        kWaitRenewal,    // wait for the renewal in flight, then take again
        kAskExact,       // let Redis decide it; with `ask` > 0, send a
                         // renewal of `ask` units in the same batch
    };

    Kind kind;
    std::uint64_t ask;
    LeaseReturn give_back;  // a dead lease found first: send it back
};

class LeaseLedger {
public:
    LeaseLedger(LeaseState &state, const LeaseParams &params)
        : s_(state), params_(params) {}

    // A request of `cost` units at now_ms, for a zone of `limit` (the
    // override in force, if one is, replaces it) whose fleet has
    // `servers` live servers.  A lease that has died first is
    // given back (give_back).  A request told kWaitRenewal is not yet
    // counted in the rate: it is when it is taken again.
    LeaseTake take(std::uint64_t cost, std::uint64_t now_ms,
                   std::uint64_t limit, std::uint64_t servers);

    // The renewal's reply: Redis counted `units` (0 to what was asked) in
    // `bucket`, `left_ms` before that bucket ended by its clock, under
    // `override` (none: not set), and the fleet's count after it is
    // fleet_used.  Returns a lease it replaced (another bucket's), or the
    // grant itself if it is dead on arrival or no renewal was in flight (a
    // reply that came after renewal_failed(), whose override is not taken:
    // its end cannot be dated).
    LeaseReturn granted(std::uint64_t units, std::uint64_t bucket,
                        std::uint64_t fleet_used, std::uint64_t left_ms,
                        std::uint64_t now_ms, const Override &override);

    // The renewal failed or its reply was given up on: none in flight.
    // What it may have been granted is lost until its bucket leaves.
    void renewal_failed() { s_.asked = 0; }

    // Redis decided a request exactly, in a call sent at sent_ms (read
    // only with an override), under `override` (none: not set); the
    // fleet's count is fleet_used.
    void counted(std::uint64_t fleet_used, const Override &override,
                 std::uint64_t sent_ms);

    // The override in force at now_ms, as Redis last told it, its left_ms
    // counted from now_ms; none once it has lapsed (then forgotten).
    Override override_at(std::uint64_t now_ms);

    // The subject was forgiven or its override changed: the override
    // told is forgotten until a reply tells it again (the units stay).
    void forget_override() { s_.override_limit = 0; }

    // The lease's units if it has died (its bucket may have ended) or the
    // subject has been quiet for idle_ms; they are no longer held.
    LeaseReturn expire(std::uint64_t now_ms);

    // Everything held, to give back before the entry is evicted.
    LeaseReturn release();

    std::uint64_t units() const { return s_.units; }
    std::uint64_t asked() const { return s_.asked; }
    std::uint64_t cap() const { return s_.cap; }
    double rate() const { return s_.rate; }
    double rtt_ms() const
    {
        return s_.rtt_ms > 0 ? s_.rtt_ms : params_.initial_rtt_ms;
    }

private:
    void note(std::uint64_t cost, std::uint64_t now_ms);
    void note_override(const Override &override, std::uint64_t sent_ms);
    std::uint64_t ask_for(std::uint64_t held, bool at_low_water,
                          std::uint64_t now_ms, std::uint64_t limit,
                          std::uint64_t servers);

    LeaseState &s_;
    const LeaseParams &params_;
};

}  // namespace ratelimit
