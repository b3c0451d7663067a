#include "zones/batch_decider.hpp"

#include <algorithm>
#include <iterator>

#include "protocol/batch_protocol.hpp"

namespace ratelimit {

BatchDecider::BatchDecider(const Batch &call, Store *store)
    : call_(call), store_(*store), window_(store), gcra_(store, call.now_us)
{
    reply_.assign(call.reply_size, ReplyElement{0, nullptr});
    reply_[0].value = call.now_ms;
}

// The one place that asks a zone's kind.
ZoneKind &BatchDecider::kind(const ZoneParams &zone)
{
    if (zone.gcra != 0) {
        return gcra_;
    }

    return window_;
}

// The script's main loop: run() takes what it can, careful() the rest, and
// a request that raised in run() is decided afresh by careful(nil).  A
// request under an override or a ban in force goes to careful() too, as
// the script's does, and so does one a banning zone refuses.  Each entry
// then tells its overrides and bans, the reply's tail.
void BatchDecider::run()
{
    read_markers();

    for (std::size_t e = 0; e < call_.entries.size(); e++) {
        const Entry &entry = call_.entries[e];

        if (apply(entry) || !entry.solo || !fast()) {
            careful(entry);
        }

        tell(e + 1, entry);

        k_ += entry.keys();
        r_ += entry.reply_size();
        store_.release();
    }

    reply_.insert(reply_.end(), told_.begin(), told_.end());
}

// The script's side.lua: a side zone reads its side keys where its marker
// key exists (EXISTS, the markers after the count keys in the zones'
// order), or where the call names no markers.
void BatchDecider::read_markers()
{
    KeyNumber marker = call_.count_keys;
    reading_.assign(call_.zones.size(), false);
    marker_.assign(call_.zones.size(), 0);

    for (std::size_t d = 0; d < call_.zones.size(); d++) {
        if (!call_.zones[d].side_base.empty()) {
            marker_[d] = marker;
            reading_[d] = !call_.marked || store_.exists(marker++);
        }
    }

    store_.release();
}

// What is in force for count key `key` of zone d, which reads: its side
// key read (GET) at its first use in the call; a key of another type or
// none holds nothing.
BatchDecider::Held &BatchDecider::side_value(std::size_t d, KeyNumber key)
{
    std::string_view name = store_.key_name(key);
    auto [got, first] = got_.try_emplace(name);

    if (first) {
        FieldValue value;
        store_.get_named(side_key(call_.zones[d].side_base, name), &value);
        got->second = value.present()
                          ? Held{read_override(value.text, call_.now_ms),
                                 read_ban(value.text, call_.now_ms), false,
                                 false}
                          : Held{};
    }

    return got->second;
}

// Points applied_ at the request's zones as it applies them, as the
// script's zone_of() does.  Whether any is under an override or a ban.
bool BatchDecider::apply(const Entry &entry)
{
    std::size_t n = entry.zones.size();
    bool any = false;
    applied_.resize(n);
    derived_.resize(std::max(derived_.size(), n));

    for (std::size_t i = 0; i < n; i++) {
        std::size_t d = static_cast<unsigned char>(entry.zones[i]);

        // A failed settle's or lease's byte may name no zone; it is never
        // decided.
        applied_[i] = d < call_.zones.size() ? &call_.zones[d] : nullptr;

        if (applied_[i] == nullptr || !reading_[d]) {
            continue;
        }

        const Held &held = side_value(d, k_ + i);

        if (held.o.in_force || held.ban_end != 0) {
            derived_[i] = held.o.in_force ? overridden(*applied_[i], held.o)
                                          : *applied_[i];
            derived_[i].barred = held.ban_end != 0;
            applied_[i] = &derived_[i];
            any = true;
        }
    }

    return any;
}

// The script's ban_subject(): zone d's subject of count key `key` banned
// till now + the zone's ban, its side key's other parts kept, expiring at
// the latest end of its parts (PTTL), a member of the zone's marker.
CallError BatchDecider::ban(std::size_t d, KeyNumber key)
{
    const ZoneParams &zone = call_.zones[d];
    double till = call_.now_ms + zone.ban_ms;
    std::string_view name = store_.key_name(key);
    std::string side = side_key(zone.side_base, name);
    FieldValue value;
    store_.get_named(side, &value);
    bool kept = false;
    std::string made = with_ban(value.present() ? value.text : "", till,
                                &kept);
    double at = till;
    bool forever = false;

    if (value.present()) {
        double ttl = store_.pttl_named(side);
        forever = ttl == -1 && kept;
        at = ttl > 0 ? std::max(till, call_.now_ms + ttl) : till;
    }

    char at_text[lua::kMaxText];
    char now_text[lua::kMaxText];
    lua::format(at, at_text);
    lua::format(call_.now_ms, now_text);

    if (CallError error = store_.set_named(side, made,
                                           forever ? nullptr : at_text))
    {
        return error;
    }

    if (call_.marked) {
        store_.mark(marker_[d], side, forever ? "+inf" : at_text, now_text);
    }

    got_[name] = Held{read_override(made, call_.now_ms), till, true,
                      !reading_[d]};
    reading_[d] = true;
    return nullptr;
}

// Bans the subject of the request's zone i (its key `key`) where the zone
// bans and its limit (an override's where one applies), above 0, not a
// ban in force, refused a counted request: as the script's bans(), a
// limit of 0 is a plan blocked, whose ban would outlive its unblocking.
CallError BatchDecider::ban_if(const Entry &entry, std::size_t i,
                               KeyNumber key, bool counting, bool over)
{
    const ZoneParams &zone = zone_of(i);

    if (!(over && counting && zone.ban_ms > 0 && zone.limit > 0
          && !zone.barred))
    {
        return nullptr;
    }

    return ban(static_cast<unsigned char>(entry.zones[i]), key);
}

// The tail's kOverrideReplies elements of one item: the entry's number
// and the zone's among its (from 1), then three numbers.
void BatchDecider::tell_item(std::size_t number, std::size_t i, double a,
                             double b, double left)
{
    const ReplyElement told[] = {
        {static_cast<double>(number), nullptr},
        {static_cast<double>(i), nullptr},
        {a, nullptr},
        {b, nullptr},
        {left, nullptr}};
    static_assert(std::size(told) == kOverrideReplies);
    told_.insert(told_.end(), std::begin(told), std::end(told));
}

// The script's tell(): of each zone of entry `number` that reads, its
// override (L, W and the ms until it lapses, 0 never; none the entry was
// not decided under) and its ban (D where the entry set it, else 0;
// kToldBanWindow; the ms left).
void BatchDecider::tell(std::size_t number, const Entry &entry)
{
    for (std::size_t i = 0; i < entry.zones.size(); i++) {
        std::size_t d = static_cast<unsigned char>(entry.zones[i]);

        if (d >= call_.zones.size() || !reading_[d]) {
            continue;
        }

        Held &held = side_value(d, k_ + i);
        const Override &o = held.o;

        if (o.in_force && !held.unread) {
            tell_item(number, i + 1, o.limit, o.window_ms,
                      o.lapse_ms != 0 ? o.lapse_ms - call_.now_ms : 0);
        }

        if (held.ban_end != 0) {
            double left = held.ban_end - call_.now_ms;
            tell_item(number, i + 1, held.set ? left : 0, kToldBanWindow,
                      left);
            held.set = false;
            held.unread = false;
        }
    }
}

// run() for the request, of one zone.  False where the script's run()
// raised, having written nothing (or in the one write that failed), or
// left the request to careful().
bool BatchDecider::fast()
{
    const ZoneParams &zone = zone_of(0);
    FastDecision decision;
    kind(zone).run(k_, zone, &decision);

    if (decision.outcome == FastDecision::kRaised) {
        return false;
    }

    for (std::size_t j = 0; j <= kRepliesPerZone; j++) {
        set(r_ + j, decision.reply[j]);
    }

    return true;
}

void BatchDecider::careful(const Entry &entry)
{
    if (CallError error = decide(k_, entry, r_)) {
        reply_[r_] = {0, error};

        for (std::size_t j = r_ + 1; j < r_ + entry.reply_size(); j++) {
            set(j, 0);
        }
    }
}

CallError BatchDecider::decide(std::size_t k, const Entry &entry,
                               std::size_t r)
{
    if (entry.error != nullptr) {
        return entry.error;
    }

    if (entry.mode == kEntryInterval) {
        return peek_interval(k, entry, r);
    }

    if (entry.mode == kEntrySettle) {
        return settle(k, entry, r);
    }

    if (entry.mode == kEntryLease) {
        return lease(k, entry, r);
    }

    return decide_zones(k, entry, r);
}

// A settle, answered with 0 (never rejected), the zone's count and oldest
// bucket after it (a GCRA zone's backlog in us, and 0), and the units
// (turns) it applied.
CallError BatchDecider::settle(std::size_t k, const Entry &entry,
                               std::size_t r)
{
    const ZoneParams &zone = zone_of(0);
    double count, oldest, applied;

    if (CallError error = kind(zone).settle(k, zone, entry.delta, entry.at,
                                            &count, &oldest, &applied))
    {
        return error;
    }

    set(r, 0);
    set(r + 1, count);
    set(r + 2, oldest);
    set(r + 3, applied);
    return nullptr;
}

// A lease of an enforced window zone (its errors, a GCRA zone's among
// them, are the entry's, found as it was parsed): g = min(asked,
// max(limit - count, 0)) units granted and counted as a cost of g.
// Answered as decide_one() answers, but refused (1) only where units were
// asked and none granted, and then g.
CallError BatchDecider::lease(std::size_t k, const Entry &entry,
                              std::size_t r)
{
    const ZoneParams &zone = zone_of(0);
    reads_.resize(std::max<std::size_t>(reads_.size(), 1));
    ZoneRead &z = reads_[0];

    if (CallError error = window_.read_zone(k, zone, &z)) {
        return error;
    }

    double granted = zone.barred ? 0
                                 : std::min(entry.asked,
                                            std::max(zone.limit - z.count,
                                                     0.0));
    bool over = window_.over(z, entry.asked, zone);
    double count, oldest;

    if (CallError error = window_.write_zone(k, zone, granted, &z, &count,
                                             &oldest))
    {
        return error;
    }

    set(r, granted == 0 && entry.asked > 0 ? 1 : 0);
    set(r + 1, count);
    set(r + 2, oldest);
    set(r + 3, over ? 1 : 0);
    set(r + 4, granted);
    return nullptr;
}

// "c", "w", "p" and, its first part, "i".
CallError BatchDecider::decide_zones(std::size_t k, const Entry &entry,
                                     std::size_t r)
{
    std::size_t n = entry.zones.size();
    bool counting = entry.mode == kEntryCount || entry.mode == kEntryCosts;
    reads_.resize(std::max(reads_.size(), n));

    if (n == 1) {
        return decide_one(k, entry, counting, r);
    }

    bool rejected = false;

    for (std::size_t i = 0; i < n; i++) {
        const ZoneParams &zone = zone_of(i);
        ZoneKind &zone_kind = kind(zone);

        if (CallError error = zone_kind.read_zone(k + i, zone,
                                                  &reads_[i]))
        {
            return error;
        }

        if (zone_kind.over(reads_[i], entry.cost(i), zone) && zone.enforce) {
            rejected = true;
        }
    }

    set(r, rejected ? 1 : 0);

    for (std::size_t i = 0; i < n; i++) {
        const ZoneParams &zone = zone_of(i);
        ZoneKind &zone_kind = kind(zone);
        double cost = entry.cost(i);
        bool over = zone_kind.over(reads_[i], cost, zone);
        std::size_t q = r + kRepliesPerZone * i + 1;
        double count, oldest;

        if (CallError error = zone_kind.write_zone(
                k + i, zone, counting && !rejected && !over ? cost : 0,
                &reads_[i], &count, &oldest))
        {
            return error;
        }

        set(q, count);
        set(q + 1, oldest);
        set(q + 2, over ? 1 : 0);

        if (CallError error = ban_if(entry, i, k + i, counting, over)) {
            return error;
        }
    }

    return nullptr;
}

// decide_zones() of a request of one zone: nothing to hold while others
// are read.
CallError BatchDecider::decide_one(std::size_t k, const Entry &entry,
                                   bool counting, std::size_t r)
{
    const ZoneParams &zone = zone_of(0);
    ZoneKind &zone_kind = kind(zone);
    ZoneRead &z = reads_[0];

    if (CallError error = zone_kind.read_zone(k, zone, &z)) {
        return error;
    }

    double cost = entry.cost(0);
    bool over = zone_kind.over(z, cost, zone);
    set(r, over && zone.enforce ? 1 : 0);
    double count, oldest;

    if (CallError error = zone_kind.write_zone(
            k, zone, counting && !over ? cost : 0, &z, &count, &oldest))
    {
        return error;
    }

    set(r + 1, count);
    set(r + 2, oldest);
    set(r + 3, over ? 1 : 0);
    return ban_if(entry, 0, k, counting, over);
}

CallError BatchDecider::peek_interval(std::size_t k, const Entry &entry,
                                      std::size_t r)
{
    std::size_t n = entry.zones.size();

    if (CallError error = decide_zones(k, entry, r)) {
        return error;
    }

    for (std::size_t i = 0; i < n; i++) {
        const ZoneParams &zone = zone_of(i);
        double count;

        if (CallError error = kind(zone).count_newest(
                k + i, zone, entry.wanted[i],
                reply_[r + kRepliesPerZone * i + 1].value,
                &count))
        {
            return error;
        }

        set(r + kRepliesPerZone * n + 1 + i, count);
    }

    return nullptr;
}

}  // namespace ratelimit
