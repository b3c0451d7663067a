#include "test/decide_fixture.hpp"

#include <cmath>
#include <string>

#include "protocol/batch_protocol.hpp"

namespace ratelimit::test {

namespace {

// Zone `spec` read by parse_zone() at `now_ms`, from its arguments as
// nginx sends them; `mode` holds its mode argument, which the zone's side
// key base views.
ZoneParams params(const ZoneSpec &spec, double now_ms, std::string *mode)
{
    char limit[lua::kMaxText], bucket_ms[lua::kMaxText], span[lua::kMaxText];
    lua::format(spec.limit, limit);
    lua::format(spec.bucket_ms, bucket_ms);
    lua::format(spec.span, span);
    char ban[lua::kMaxText];
    *mode = spec.side_base.empty()
                ? std::string(1, spec.enforce ? kZoneEnforced : kZoneDryRun)
            : spec.ban_ms > 0
                ? kZoneEnforcedBan
                      + std::string(ban, lua::format(spec.ban_ms, ban))
                      + kNumbersEnd + std::string(spec.side_base)
                : (spec.enforce ? kZoneEnforcedSide : kZoneDryRunSide)
                      + std::string(spec.side_base);
    std::string_view args[] = {limit, bucket_ms, span,
                               std::string_view(&spec.kind, 1), *mode};
    ZoneParams zone{};

    if (const char *error = parse_zone(args, now_ms, spec.packed, &zone)) {
        ADD_FAILURE() << "zone arguments refused: " << error;
    }

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
    std::vector<std::string> modes(zones.size());

    for (std::size_t i = 0; i < zones.size(); i++) {
        call.zones.push_back(params(zones[i], now_ms, &modes[i]));
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
