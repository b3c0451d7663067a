#include "test/decide_fixture.hpp"

#include <algorithm>
#include <cmath>

#include "limits/window_rules.hpp"
#include "zones/packed_window.hpp"

namespace ratelimit::test {

namespace {

// As parse_zone() reads a zone's arguments at `now_ms`.
ZoneParams params(const ZoneSpec &spec, double now_ms)
{
    ZoneParams zone{};
    zone.limit = spec.limit;
    zone.bucket_ms = spec.bucket_ms;
    zone.span = spec.span;
    zone.fixed = spec.kind == 'f';
    zone.gcra = spec.kind == 'g'
                    ? spec.bucket_ms * 1000 / std::max(spec.limit, 1.0)
                    : 0;
    zone.enforce = spec.enforce;
    zone.side_base = spec.side_base;
    zone.packed = spec.packed && packed_fits(zone.fixed, zone.span);
    zone.bucket = std::floor(now_ms / spec.bucket_ms);
    lua::format(zone.bucket, zone.bucket_field);
    return zone;
}

}  // namespace

Entry entry(char mode, std::string_view zones)
{
    Entry made{};
    made.mode = mode;
    made.zones = zones;
    return made;
}

Entry settle_entry(double delta, double at, std::string_view zone)
{
    Entry made = entry('s', zone);
    made.delta = delta;
    made.at = at;
    return made;
}

Entry lease_entry(double asked, std::string_view zone)
{
    Entry made = entry('l', zone);
    made.asked = asked;
    return made;
}

std::vector<double> one(const std::vector<ReplyElement> &reply,
                        std::size_t r)
{
    return {reply[r].value, reply[r + 1].value, reply[r + 2].value,
            reply[r + 3].value};
}

std::vector<ReplyElement> DecideTest::decide(
    const std::vector<Entry> &entries)
{
    Batch call{now_ms, now_ms * 1000, {}, entries, 1};
    call.marked = marked;

    for (const ZoneSpec &spec : zones) {
        call.zones.push_back(params(spec, now_ms));
    }

    for (Entry &made : call.entries) {
        made.solo = solo(made, call.zones);
        call.count_keys += made.keys();
        call.reply_size += made.reply_size();
    }

    store.now_ms = now_ms;
    BatchDecider decider(call, &store);
    decider.run();
    return decider.reply();
}

double DecideTest::bucket(double bucket_ms) const
{
    return std::floor(now_ms / bucket_ms);
}

const MemoryStore::Value *DecideTest::live(const std::string &key)
{
    store.now_ms = now_ms;
    return store.find(key);
}

std::string DecideTest::field(const std::string &key,
                              const std::string &name)
{
    const MemoryStore::Value *value = live(key);

    if (value == nullptr || !value->hash) {
        return "";
    }

    auto it = value->fields.find(name);
    return it == value->fields.end() ? "" : it->second;
}

std::string DecideTest::text(const std::string &key)
{
    const MemoryStore::Value *value = live(key);
    return value == nullptr || value->hash ? "" : value->text;
}

double DecideTest::expire_at(const std::string &key)
{
    const MemoryStore::Value *value = live(key);
    return value == nullptr ? -1 : value->expire_at_ms;
}

}  // namespace ratelimit::test
