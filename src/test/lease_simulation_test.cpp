// The lease protocol for a fleet of servers against a modelled Redis, as
// issue 28 asks: random (seeded) arrivals at rates that vary per server and
// over time, random reply delays, lost replies and give-backs, crashed
// servers, a sliding (or fixed) window of buckets in Redis.
//
// Time is true time in microseconds.  Redis's clock is it in whole ms; each
// server's clock is it plus its own offset, in whole ms, so that the ledger
// must date leases without a shared clock.  Redis decides each message
// atomically when it arrives: a grant is min(asked, limit - window count),
// counted in the current bucket; an exact request is counted if it fits; a
// give-back (settle) takes its units off its bucket while that bucket is
// in the window.
//
// Checked after every event, exactly: the admissions whose time lies in
// the window are at most the limit; the units counted in the window that
// no admission used, H, are what the servers hold, the grants and
// give-backs in flight and the units lost (an identity of the model); and
// H <= q * (S + G + X), the bound of lease_ledger.hpp, q = floor(L / (k
// S)), G the give-backs in flight, X the losses in the window.  At the end
// of every bucket in which Redis refused a request after the last
// give-back was applied, the window's admissions are at least
// L - (c_max - 1) - q * (S + G + X).
//
// With a subject's override (issue 41) Redis applies its limit L' from a
// time T on, and tells it in every reply: the servers' asks are sized by
// it.  From T on, the window's admissions are at most max(L', A + H), A
// the admissions made before T still in the window and H the units held
// (counted, not admitted) at T: every count after T leaves Redis's count
// at most L', and the units counted before T are at most those admitted
// and those held.  q is then floor(max(L, L') / (k S)), and L is L' at
// the ends of the buckets after T's.
#include "leases/lease_ledger.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <queue>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

using Kind = LeaseTake::Kind;

struct SimParams {
    std::uint64_t limit;
    bool overridden;             // Redis applies override_limit ...
    std::uint64_t override_limit;
    std::uint64_t override_from_ms;  // ... from this time on
    std::uint64_t window_ms;
    std::uint64_t bucket_ms;
    int servers;
    std::uint64_t duration_ms;
    double rate_lo;  // a server's base rate, units/ms, log-uniform
    double rate_hi;
    bool phases;     // every phase_ms each rate is 0, 0.5, 1 or 2 times it
    std::uint64_t cost_max;  // 90% cost 1, else 1 to cost_max
    double p_lost_reply;     // a grant's reply lost
    double p_lost_settle;    // a give-back lost on the way
    double crashes_per_s;    // fleet-wide; a crashed server is down 300 ms
    std::uint64_t warmup_ms;  // Redis calls counted after this
    LeaseParams lease;
};

struct SimResult {
    std::string failure;  // empty: every check held
    std::uint64_t requests = 0;
    std::uint64_t admitted = 0;
    std::uint64_t leased = 0;  // admitted from a lease
    std::uint64_t refused = 0;  // by Redis
    std::uint64_t waited = 0;
    std::uint64_t calls = 0;  // Redis calls after the warm-up
    std::uint64_t requests_counted = 0;  // requests after the warm-up
    std::uint64_t saturated_ends = 0;
    std::uint64_t max_under = 0;  // L - admitted at a saturated end
    std::uint64_t max_under_bound = 0;
    std::uint64_t max_held = 0;  // H
    std::uint64_t lost_replies = 0;
    std::uint64_t lost_settles = 0;
    std::uint64_t crashes = 0;
};

constexpr std::uint64_t kUs = 1000;
constexpr std::uint64_t kSweepUs = 10 * kUs;
constexpr std::uint64_t kTimeoutUs = 50 * kUs;
constexpr std::uint64_t kDownUs = 300 * kUs;
constexpr std::uint64_t kPhaseUs = 700 * kUs;

class Sim {
public:
    Sim(const SimParams &p, std::uint64_t seed)
        : p_(p), rng_(seed), servers_(static_cast<std::size_t>(p.servers)),
          ring_(p.window_ms / p.bucket_ms + 4),
          q_(std::max(p.limit, p.overridden ? p.override_limit : 0)
             / (p.lease.share_k * static_cast<std::uint64_t>(p.servers))),
          held_by_(servers_.size())
    {
        std::uniform_real_distribution<double> u(0, 1);
        for (std::size_t i = 0; i < servers_.size(); i++) {
            Server &s = servers_[i];
            s.offset_us = rng_() % 1000000000000ULL;
            s.base = p_.rate_lo * std::pow(p_.rate_hi / p_.rate_lo, u(rng_));
            schedule(arrival_gap(s), kArrival, static_cast<int>(i));
        }
        schedule(kSweepUs, kSweep, -1);
        if (p_.phases) {
            schedule(kPhaseUs, kPhase, -1);
        }
        if (p_.crashes_per_s > 0) {
            schedule(crash_gap(), kCrash, -1);
        }
    }

    SimResult run();

private:
    enum Type { kArrival, kToRedis, kToServer, kTimeout, kSweep, kCrash,
                kRestart, kPhase };
    enum Msg { kExact, kGrant, kSettle };

    struct Event {
        std::uint64_t t;
        std::uint64_t seq;
        Type type;
        int server;
        Msg msg = kExact;
        std::uint64_t epoch = 0, id = 0, cost = 0, ask = 0;
        std::uint64_t units = 0, bucket = 0, used = 0, left = 0;
        std::uint64_t sent = 0;  // when the server sent the call
        Override told{};         // the override Redis applied
    };

    // The queue orders small keys; the events wait in pool_.
    struct Key {
        std::uint64_t t;
        std::uint64_t seq_index;  // seq << 24 | index in pool_

        bool operator>(const Key &o) const
        {
            return t != o.t ? t > o.t : seq_index > o.seq_index;
        }
    };

    struct Server {
        LeaseState state{};
        std::uint64_t epoch = 0;
        bool up = true;
        std::uint64_t offset_us = 0;
        double base = 0, mult = 1;
        std::uint64_t renewal_id = 0;  // of the renewal in flight
        std::uint64_t next_id = 0;
        std::deque<std::uint64_t> waiting;  // costs
    };

    // Per bucket, in a ring tagged with the bucket's number.
    struct Slot {
        std::uint64_t bucket = ~std::uint64_t{0};
        std::int64_t count = 0;      // Redis's count
        std::int64_t admitted = 0;   // admissions at times in the bucket
        std::int64_t admitted_since = 0;  // those from the override's T
        std::int64_t granting = 0;   // granted, reply on its way
        std::int64_t settling = 0;   // give-backs on their way, units
        std::int64_t settles = 0;    // and their number
        std::int64_t lost = 0;       // units lost
        std::int64_t losses = 0;     // and the losses' number
    };

    Slot &slot(std::uint64_t bucket)
    {
        Slot &s = ring_[bucket % ring_.size()];
        if (s.bucket != bucket) {
            s = Slot{};
            s.bucket = bucket;
        }
        return s;
    }

    std::uint64_t buckets() const { return p_.window_ms / p_.bucket_ms; }
    std::uint64_t bucket_at(std::uint64_t t) const
    {
        return t / kUs / p_.bucket_ms;
    }
    bool in_window(std::uint64_t bucket, std::uint64_t t) const
    {
        std::uint64_t cur = bucket_at(t);
        return bucket <= cur && bucket + buckets() > cur;
    }
    std::uint64_t local_ms(const Server &s, std::uint64_t t) const
    {
        return (t + s.offset_us) / kUs;
    }

    template <typename F> std::int64_t window_sum(std::uint64_t t, F f)
    {
        std::int64_t sum = 0;
        std::uint64_t cur = bucket_at(t);
        for (std::uint64_t i = 0; i < buckets() && i <= cur; i++) {
            sum += f(slot(cur - i));
        }
        return sum;
    }

    double uniform() { return std::uniform_real_distribution<>(0, 1)(rng_); }

    bool overriding(std::uint64_t t) const
    {
        return p_.overridden && t >= p_.override_from_ms * kUs;
    }

    // The limit Redis applies at t.
    std::int64_t limit_at(std::uint64_t t) const
    {
        return static_cast<std::int64_t>(overriding(t) ? p_.override_limit
                                                       : p_.limit);
    }

    std::uint64_t arrival_gap(const Server &s)
    {
        double rate = s.base * s.mult;  // per ms
        if (rate <= 0) {
            return kPhaseUs;
        }
        double gap = -std::log(1 - uniform()) / rate * kUs;
        return static_cast<std::uint64_t>(gap) + 1;
    }

    std::uint64_t crash_gap()
    {
        double gap = -std::log(1 - uniform()) / p_.crashes_per_s * 1e6;
        return static_cast<std::uint64_t>(gap) + 1;
    }

    // One way: 0.2 to 1.5 ms, 2% of the time 5 to 20 ms.
    std::uint64_t delay()
    {
        if (uniform() < 0.02) {
            return 5 * kUs + rng_() % (15 * kUs);
        }
        return 200 + rng_() % 1300;
    }

    void schedule(std::uint64_t after, Type type, int server)
    {
        schedule(after, type, server, Event{});
    }

    void schedule(std::uint64_t after, Type type, int server, Event e)
    {
        e.t = now_ + after;
        e.seq = seq_++;
        e.type = type;
        e.server = server;
        std::uint64_t index;
        if (free_.empty()) {
            index = pool_.size();
            pool_.push_back(e);
        } else {
            index = free_.back();
            free_.pop_back();
            pool_[index] = e;
        }
        queue_.push(Key{e.t, e.seq << 24 | index});
    }

    void call(int server, Event e)
    {
        if (now_ >= p_.warmup_ms * kUs) {
            result_.calls++;
        }
        e.epoch = servers_[server].epoch;
        e.sent = now_;
        schedule(delay(), kToRedis, server, e);
    }

    void give_back(int server, LeaseReturn back)
    {
        if (back.units == 0) {
            return;
        }
        Event e;
        e.msg = kSettle;
        e.units = back.units;
        e.bucket = back.bucket;
        slot(back.bucket).settling += static_cast<std::int64_t>(back.units);
        slot(back.bucket).settles++;
        call(server, e);
    }

    void admit(std::uint64_t cost)
    {
        Slot &b = slot(bucket_at(now_));
        b.admitted += static_cast<std::int64_t>(cost);
        if (overriding(now_)) {
            b.admitted_since += static_cast<std::int64_t>(cost);
        }
        result_.admitted += cost;
    }

    void decide(int i, std::uint64_t cost, bool fresh);
    void send_renewal_with(int i, Event e, std::uint64_t ask);
    void drain(int i);
    void at_redis(const Event &e);
    void at_server(const Event &e);
    void crash(int i);
    void refresh(int i);
    void refresh_all()
    {
        for (std::size_t i = 0; i < servers_.size(); i++) {
            refresh(static_cast<int>(i));
        }
    }
    void check();
    void check_bucket_end(std::uint64_t bucket);
    void fail(const std::string &what);

    std::uint64_t renewal_ask(const Server &s)
    {
        return s.state.asked;
    }

    const SimParams &p_;
    std::mt19937_64 rng_;
    std::vector<Server> servers_;
    std::vector<Slot> ring_;
    std::uint64_t q_;
    std::priority_queue<Key, std::vector<Key>, std::greater<Key>> queue_;
    std::vector<Event> pool_;
    std::vector<std::uint64_t> free_;
    std::uint64_t now_ = 0;
    std::uint64_t seq_ = 0;
    std::uint64_t last_refusal_ = 0;   // +1, 0: none
    std::uint64_t last_settle_ = 0;    // +1, 0: none
    std::vector<std::int64_t> held_by_;  // refresh()
    std::int64_t in_leases_ = 0;
    std::int64_t held_at_override_ = -1;  // H at T; -1: T not reached
    SimResult result_;
};

void Sim::fail(const std::string &what)
{
    if (result_.failure.empty()) {
        std::ostringstream out;
        out << "at " << now_ << " us (bucket " << bucket_at(now_)
            << "): " << what;
        result_.failure = out.str();
    }
}

void Sim::send_renewal_with(int i, Event e, std::uint64_t ask)
{
    Server &s = servers_[i];
    e.ask = ask;
    if (ask > 0) {
        e.id = ++s.next_id;
        s.renewal_id = e.id;
        Event timeout;
        timeout.epoch = s.epoch;
        timeout.id = e.id;
        schedule(kTimeoutUs, kTimeout, i, timeout);
    }
    call(i, e);
}

// A request of `cost` at server i; `fresh` if it has just arrived (else
// it waited for a renewal).
void Sim::decide(int i, std::uint64_t cost, bool fresh)
{
    Server &s = servers_[i];
    LeaseLedger ledger(s.state, p_.lease);
    LeaseTake t = ledger.take(cost, local_ms(s, now_), p_.limit,
                              static_cast<std::uint64_t>(p_.servers));

    give_back(i, t.give_back);
    switch (t.kind) {
    case Kind::kTaken:
    case Kind::kRenewAndTaken:
        admit(cost);
        result_.leased += cost;
        if (t.kind == Kind::kRenewAndTaken) {
            Event e;
            e.msg = kGrant;
            send_renewal_with(i, e, t.ask);
        }
        break;
    case Kind::kWaitRenewal:
        if (fresh) {
            result_.waited++;
        }
        s.waiting.push_back(cost);
        break;
    case Kind::kAskExact: {
        Event e;
        e.msg = kExact;
        e.cost = cost;
        send_renewal_with(i, e, t.ask);
        break;
    }
    }
}

void Sim::drain(int i)
{
    Server &s = servers_[i];
    std::size_t n = s.waiting.size();
    for (std::size_t k = 0; k < n; k++) {
        std::uint64_t cost = s.waiting.front();
        s.waiting.pop_front();
        decide(i, cost, false);
    }
}

void Sim::at_redis(const Event &e)
{
    std::uint64_t cur = bucket_at(now_);
    std::int64_t used = window_sum(now_, [](Slot &s) { return s.count; });
    std::int64_t limit = limit_at(now_);
    Event reply = e;

    if (e.msg == kSettle) {
        Slot &b = slot(e.bucket);
        if (!in_window(e.bucket, now_)) {
            return;  // the slot may have been reused: nothing to undo
        }
        b.settling -= static_cast<std::int64_t>(e.units);
        b.settles--;
        if (uniform() < p_.p_lost_settle) {
            result_.lost_settles++;
            b.lost += static_cast<std::int64_t>(e.units);
            b.losses++;
            return;
        }
        std::int64_t take = std::min(b.count,
                                     static_cast<std::int64_t>(e.units));
        b.count -= take;
        last_settle_ = now_ + 1;
        return;
    }

    if (e.msg == kExact) {
        std::int64_t cost = static_cast<std::int64_t>(e.cost);
        if (used + cost <= limit) {
            slot(cur).count += cost;
            used += cost;
            admit(e.cost);
        } else {
            last_refusal_ = now_ + 1;
            result_.refused++;
        }
    }
    if (e.ask > 0) {
        std::int64_t room = limit - used;
        std::uint64_t g = std::min<std::uint64_t>(
            e.ask, room > 0 ? static_cast<std::uint64_t>(room) : 0);
        slot(cur).count += static_cast<std::int64_t>(g);
        used += static_cast<std::int64_t>(g);
        reply.units = g;
        reply.bucket = cur;
        reply.left = (cur + 1) * p_.bucket_ms - now_ / kUs;
        if (uniform() < p_.p_lost_reply) {
            result_.lost_replies++;
            slot(cur).lost += static_cast<std::int64_t>(g);
            slot(cur).losses++;
            return;  // with an exact request, its verdict too
        }
        slot(cur).granting += static_cast<std::int64_t>(g);
    }
    reply.used = static_cast<std::uint64_t>(used);
    if (overriding(now_)) {
        reply.told = {true, p_.override_limit, p_.window_ms, 0};
    }
    schedule(delay(), kToServer, e.server, reply);
}

void Sim::at_server(const Event &e)
{
    Server &s = servers_[e.server];
    bool stale = !s.up || e.epoch != s.epoch
                 || (e.ask > 0 && e.id != s.renewal_id);

    if (e.ask > 0) {
        Slot &b = slot(e.bucket);
        if (in_window(e.bucket, now_)) {
            b.granting -= static_cast<std::int64_t>(e.units);
            if (stale) {
                b.lost += static_cast<std::int64_t>(e.units);
                b.losses += e.units > 0;
            }
        }
    }
    if (stale) {
        return;
    }

    LeaseLedger ledger(s.state, p_.lease);
    if (e.msg == kExact) {
        ledger.counted(e.used, e.told, local_ms(s, e.sent));
    }
    if (e.ask > 0) {
        s.renewal_id = 0;
        give_back(e.server, ledger.granted(e.units, e.bucket, e.used, e.left,
                                           local_ms(s, now_), e.told));
    }
    drain(e.server);
}

void Sim::crash(int i)
{
    Server &s = servers_[i];
    if (!s.up) {
        return;
    }
    result_.crashes++;
    if (s.state.units > 0 && in_window(s.state.bucket, now_)) {
        Slot &b = slot(s.state.bucket);
        b.lost += static_cast<std::int64_t>(s.state.units);
    }
    // Counted as a loss until the bucket after this one leaves the window:
    // a grant in flight may yet be counted in the next bucket.
    slot(bucket_at(now_) + 1).losses++;
    s.state = LeaseState{};
    s.up = false;
    s.epoch++;
    s.renewal_id = 0;
    s.waiting.clear();
    schedule(kDownUs, kRestart, i);
}

// Server i's units in a lease of a bucket in the window, kept in
// in_leases_ without a pass over every server after every event.
void Sim::refresh(int i)
{
    const Server &s = servers_[i];
    std::int64_t units = 0;
    if (s.up && s.state.units > 0 && in_window(s.state.bucket, now_)) {
        units = static_cast<std::int64_t>(s.state.units);
    }
    in_leases_ += units - held_by_[i];
    held_by_[i] = units;
    if (s.up && s.state.units + s.state.asked > s.state.cap) {
        fail("server " + std::to_string(i) + " holds more than its cap");
    }
}

void Sim::check()
{
    std::int64_t limit = limit_at(now_);
    std::int64_t admitted = window_sum(now_,
                                       [](Slot &s) { return s.admitted; });
    std::int64_t counted = window_sum(now_, [](Slot &s) { return s.count; });
    std::int64_t held = counted - admitted;

    if (held_at_override_ >= 0) {
        std::int64_t since = window_sum(now_, [](Slot &s) {
            return s.admitted_since;
        });
        limit = std::max(limit, admitted - since + held_at_override_);
    }
    if (admitted > limit) {
        fail("admitted " + std::to_string(admitted) + " in the window, over "
             + std::to_string(limit));
        return;
    }

    std::int64_t parts = window_sum(now_, [](Slot &s) {
        return s.granting + s.settling + s.lost;
    });
    std::int64_t in_leases = in_leases_;
    if (held != in_leases + parts) {
        fail("held " + std::to_string(held) + " != leases "
             + std::to_string(in_leases) + " + in flight and lost "
             + std::to_string(parts));
        return;
    }

    std::int64_t gx = window_sum(now_, [](Slot &s) {
        return s.settles + s.losses;
    });
    std::int64_t bound = static_cast<std::int64_t>(q_)
                         * (p_.servers + gx);
    if (held > bound) {
        fail("held " + std::to_string(held) + " over the bound "
             + std::to_string(bound));
    }
    result_.max_held = std::max(result_.max_held,
                                static_cast<std::uint64_t>(held));
}

// Called with the state as it is at the end of `bucket`.
void Sim::check_bucket_end(std::uint64_t bucket)
{
    std::uint64_t start = bucket * p_.bucket_ms * kUs;
    if (last_refusal_ == 0 || last_refusal_ - 1 < start
        || last_refusal_ <= last_settle_
        || overriding(now_) != overriding(start))
    {
        return;
    }

    std::int64_t admitted = window_sum(now_,
                                       [](Slot &s) { return s.admitted; });
    std::int64_t gx = window_sum(now_, [](Slot &s) {
        return s.settles + s.losses;
    });
    std::int64_t bound = static_cast<std::int64_t>(p_.cost_max) - 1
                         + static_cast<std::int64_t>(q_) * (p_.servers + gx);
    std::int64_t under = limit_at(now_) - admitted;

    result_.saturated_ends++;
    if (under > bound) {
        fail("admitted " + std::to_string(admitted)
             + " at a saturated bucket's end, under the limit by more than "
             + std::to_string(bound));
    }
    if (under > static_cast<std::int64_t>(result_.max_under)) {
        result_.max_under = static_cast<std::uint64_t>(under);
        result_.max_under_bound = static_cast<std::uint64_t>(bound);
    }
}

SimResult Sim::run()
{
    const std::uint64_t end = p_.duration_ms * kUs;

    while (!queue_.empty() && result_.failure.empty()) {
        Key key = queue_.top();
        if (key.t >= end) {
            break;
        }
        queue_.pop();
        std::uint64_t index = key.seq_index & 0xffffff;
        Event e = pool_[index];
        free_.push_back(index);
        // Crossing into a later bucket: the state is the one at the end of
        // the bucket the last event was in.
        bool crossing = bucket_at(e.t) != bucket_at(now_);
        if (crossing) {
            check_bucket_end(bucket_at(now_));
        }
        now_ = e.t;
        if (crossing) {
            refresh_all();
        }
        if (overriding(now_) && p_.override_from_ms > 0
            && held_at_override_ < 0)
        {
            // T has come, and nothing happened since.
            held_at_override_ = window_sum(now_, [](Slot &s) {
                return s.count - s.admitted;
            });
        }

        switch (e.type) {
        case kArrival: {
            Server &s = servers_[e.server];
            schedule(arrival_gap(s), kArrival, e.server);
            if (!s.up || s.base * s.mult <= 0) {
                break;
            }
            std::uint64_t cost = 1;
            if (p_.cost_max > 1 && uniform() < 0.1) {
                cost = 1 + rng_() % p_.cost_max;
            }
            result_.requests++;
            if (now_ >= p_.warmup_ms * kUs) {
                result_.requests_counted++;
            }
            decide(e.server, cost, true);
            break;
        }
        case kToRedis:
            at_redis(e);
            break;
        case kToServer:
            at_server(e);
            break;
        case kTimeout: {
            Server &s = servers_[e.server];
            if (s.up && s.epoch == e.epoch && s.renewal_id == e.id) {
                s.renewal_id = 0;
                LeaseLedger(s.state, p_.lease).renewal_failed();
                drain(e.server);
            }
            break;
        }
        case kSweep:
            for (std::size_t i = 0; i < servers_.size(); i++) {
                Server &s = servers_[i];
                if (s.up) {
                    LeaseLedger ledger(s.state, p_.lease);
                    give_back(static_cast<int>(i),
                              ledger.expire(local_ms(s, now_)));
                }
            }
            schedule(kSweepUs, kSweep, -1);
            refresh_all();
            break;
        case kCrash:
            e.server = static_cast<int>(rng_() % servers_.size());
            crash(e.server);
            schedule(crash_gap(), kCrash, -1);
            break;
        case kRestart:
            servers_[e.server].up = true;
            break;
        case kPhase: {
            const double mults[] = {0, 0.5, 1, 2};
            for (Server &s : servers_) {
                s.mult = mults[rng_() % 4];
            }
            schedule(kPhaseUs, kPhase, -1);
            break;
        }
        }
        if (e.server >= 0) {
            refresh(e.server);
        }
        check();
    }
    return result_;
}

SimResult simulate(const SimParams &p, std::uint64_t seed)
{
    Sim sim(p, seed);
    return sim.run();
}

void expect_clean(const SimResult &r, std::uint64_t seed)
{
    EXPECT_TRUE(r.failure.empty()) << "seed " << seed << ": " << r.failure;
    std::printf("seed %llu: %llu requests, %llu admitted (%llu from leases), "
                "%llu waited, calls/request %.4f, saturated bucket ends "
                "%llu, max under-admission %llu (bound there %llu), max "
                "held %llu, lost replies %llu, lost give-backs %llu, "
                "crashes %llu\n",
                static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(r.requests),
                static_cast<unsigned long long>(r.admitted),
                static_cast<unsigned long long>(r.leased),
                static_cast<unsigned long long>(r.waited),
                r.requests_counted > 0
                    ? static_cast<double>(r.calls)
                          / static_cast<double>(r.requests_counted)
                    : 0.0,
                static_cast<unsigned long long>(r.saturated_ends),
                static_cast<unsigned long long>(r.max_under),
                static_cast<unsigned long long>(r.max_under_bound),
                static_cast<unsigned long long>(r.max_held),
                static_cast<unsigned long long>(r.lost_replies),
                static_cast<unsigned long long>(r.lost_settles),
                static_cast<unsigned long long>(r.crashes));
}

// 100 servers, 20,000 per 2 s in 10 buckets, demand about twice that,
// rates switching every 700 ms, costs up to 5, 1% of replies and
// give-backs lost, a crash a second, for 5 s.
SimParams saturated()
{
    SimParams p{};
    p.limit = 20000;
    p.window_ms = 2000;
    p.bucket_ms = 200;
    p.servers = 100;
    p.duration_ms = 5000;
    p.rate_lo = 0.02;
    p.rate_hi = 0.5;
    p.phases = true;
    p.cost_max = 5;
    p.p_lost_reply = 0.01;
    p.p_lost_settle = 0.01;
    p.crashes_per_s = 1;
    p.warmup_ms = 1000;
    return p;
}

TEST(LeaseSimulation, SlidingWindowNeverOverAdmitsAndStaysWithinTheBound)
{
    for (std::uint64_t seed : {1, 2, 3}) {
        SimResult r = simulate(saturated(), seed);
        expect_clean(r, seed);
        EXPECT_GE(r.saturated_ends, 5u) << "seed " << seed;
        EXPECT_GT(r.leased, r.admitted / 2) << "seed " << seed;
        EXPECT_GT(r.crashes, 0u) << "seed " << seed;
        EXPECT_GT(r.lost_replies, 0u) << "seed " << seed;
    }
}

TEST(LeaseSimulation, FixedWindowNeverOverAdmitsAndStaysWithinTheBound)
{
    SimParams p = saturated();
    p.window_ms = 1000;
    p.bucket_ms = 1000;
    p.limit = 10000;
    for (std::uint64_t seed : {11, 12, 13}) {
        SimResult r = simulate(p, seed);
        expect_clean(r, seed);
        EXPECT_GT(r.saturated_ends, 2u) << "seed " << seed;
    }
}

// Two servers, 1,000 per 10 s, each hammered at four times its share.
TEST(LeaseSimulation, TwoServersHammeringOneSubject)
{
    SimParams p{};
    p.limit = 1000;
    p.window_ms = 10000;
    p.bucket_ms = 1000;
    p.servers = 2;
    p.duration_ms = 40000;
    p.rate_lo = 0.2;
    p.rate_hi = 0.2;
    p.cost_max = 1;
    p.p_lost_reply = 0.01;
    p.p_lost_settle = 0.01;
    p.warmup_ms = 1000;
    for (std::uint64_t seed : {21, 22, 23}) {
        SimResult r = simulate(p, seed);
        expect_clean(r, seed);
        EXPECT_GT(r.saturated_ends, 20u) << "seed " << seed;
    }
}

// A limit of 10^9, far above the load of 100 servers.
SimParams far_below_the_limit()
{
    SimParams p{};
    p.limit = 1000000000;
    p.window_ms = 10000;
    p.bucket_ms = 1000;
    p.servers = 100;
    p.duration_ms = 4500;
    p.rate_lo = 0.4;
    p.rate_hi = 1.2;
    p.cost_max = 1;
    p.warmup_ms = 2000;
    return p;
}

// After the warm-up, at most one Redis call per hundred requests, and no
// request refused.
void expect_rarely_called(const SimParams &p,
                          std::initializer_list<std::uint64_t> seeds)
{
    for (std::uint64_t seed : seeds) {
        SimResult r = simulate(p, seed);
        expect_clean(r, seed);
        double per_request = static_cast<double>(r.calls)
                             / static_cast<double>(r.requests_counted);
        EXPECT_LE(per_request, 0.01) << "seed " << seed;
        EXPECT_EQ(r.refused, 0u) << "seed " << seed;
    }
}

TEST(LeaseSimulation, FarBelowTheLimitRedisIsRarelyCalled)
{
    expect_rarely_called(far_below_the_limit(), {31, 32});
}

// A subject's override far above the load, its zone's limit of 1,000 far
// below it: the asks are sized by the override, so Redis is called as
// rarely as under a limit that high.
TEST(LeaseSimulation, ARaisedOverrideSizesTheLeases)
{
    SimParams p = far_below_the_limit();
    p.overridden = true;
    p.override_limit = p.limit;
    p.limit = 1000;
    expect_rarely_called(p, {41, 42});
}

// The saturated fleet's subject lowered to a quarter of its limit halfway:
// from then on, the window's admissions stay within max(L', A + H), and
// Redis refuses requests under the new limit.
TEST(LeaseSimulation, ALoweredOverrideHoldsWithinWhatTheLeasesHeld)
{
    SimParams p = saturated();
    p.overridden = true;
    p.override_limit = p.limit / 4;
    p.override_from_ms = 2500;
    for (std::uint64_t seed : {51, 52, 53}) {
        SimResult r = simulate(p, seed);
        expect_clean(r, seed);
        EXPECT_GE(r.saturated_ends, 5u) << "seed " << seed;
    }
}

}  // namespace
}  // namespace ratelimit
