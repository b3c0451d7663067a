#include "scripts/window_script.hpp"

#include <string>

#include "limits/window_rules.hpp"
#include "protocol/batch_protocol.hpp"

namespace ratelimit {

namespace {

// The window script for a Redis Cluster node that takes the keys of
// several slots in one call: declared as touching undeclared keys of
// several slots, and taking the keys from the front of ARGV (the count,
// then the keys) so that it declares none.
constexpr char kCrossSlotHead[] = R"lua(#!lua flags=allow-cross-slot-keys
local n = tonumber(ARGV[1])
local KEYS, ARGV = {unpack(ARGV, 2, n + 1)}, {unpack(ARGV, n + 2)}
)lua";

struct ScriptDigest {
    char hex[kSha1HexLength];

    explicit ScriptDigest(std::string_view script) { sha1_hex(script, hex); }
};

struct CrossSlotScript {
    std::string text;

    CrossSlotScript()
        : text(std::string(kCrossSlotHead) + std::string(window_script()))
    {
    }
};

bool read_count(const Reply &element, std::uint64_t *out)
{
    if (element.type != Reply::Type::kInteger || element.integer < 0) {
        return false;
    }

    *out = static_cast<std::uint64_t>(element.integer);
    return true;
}

// Whether the `items` overrides and bans from `at` are well formed, each of
// one of `entries` requests, in order.
bool told_well(const Reply *at, std::size_t items, std::size_t entries)
{
    std::uint64_t last = 0;

    for (std::size_t i = 0; i < items; i++) {
        const Reply *o = at + kOverrideReplies * i;
        std::uint64_t entry, zone, limit, window_ms, left_ms;

        if (!read_count(o[0], &entry) || !read_count(o[1], &zone)
            || !read_count(o[2], &limit) || !read_count(o[3], &window_ms)
            || !read_count(o[4], &left_ms) || entry < last || entry < 1
            || entry > entries || zone < 1 || zone > kMaxZonesPerRequest
            || (window_ms == kToldBanWindow
                    ? limit > window_rules::kMaxWindowMs || left_ms < 1
                    : limit > window_rules::kMaxLimit))
        {
            return false;
        }

        last = entry;
    }

    return true;
}

}  // namespace

std::string_view window_script_sha1()
{
    static const ScriptDigest digest(window_script());
    return {digest.hex, kSha1HexLength};
}

std::string_view cross_slot_script()
{
    static const CrossSlotScript script;
    return script.text;
}

std::string_view cross_slot_script_sha1()
{
    static const ScriptDigest digest(cross_slot_script());
    return {digest.hex, kSha1HexLength};
}

BatchReply decode_batch_reply(const Reply *reply, std::size_t elements,
                              std::size_t entries, bool sided)
{
    BatchReply out{BatchReply::Kind::kMalformed, 0, {}, {}};

    if (reply != nullptr && reply->type == Reply::Type::kError) {
        out.error = reply->text;
        out.kind = out.error.substr(0, 8) == "NOSCRIPT"
                       ? BatchReply::Kind::kNoScript
                       : BatchReply::Kind::kError;
        return out;
    }

    if (reply == nullptr || reply->type != Reply::Type::kArray
        || reply->elements < elements || elements == 0
        || (reply->elements > elements && !sided)
        || (reply->elements - elements) % kOverrideReplies != 0
        || !read_count(reply->element[0], &out.now_ms))
    {
        return out;
    }

    out.told = {reply->element + elements,
                (reply->elements - elements) / kOverrideReplies};

    if (told_well(out.told.at, out.told.items, entries)) {
        out.kind = BatchReply::Kind::kReplies;
    }

    return out;
}

Told told_of(Told told, std::size_t entry, std::size_t *next)
{
    std::size_t first = *next;

    while (*next < told.items
           && told.at[kOverrideReplies * *next].integer
                  == static_cast<long long>(entry + 1))
    {
        ++*next;
    }

    return {told.at + kOverrideReplies * first, *next - first};
}

ScriptReply decode_settle_reply(const Reply *reply, std::int64_t *applied)
{
    ScriptReply out{ScriptReply::Kind::kMalformed, false, {}};
    const Reply &units = reply[kRepliesPerZone];

    if (reply[0].type == Reply::Type::kError) {
        out.error = reply[0].text;
        out.kind = ScriptReply::Kind::kError;
        return out;
    }

    std::uint64_t rejected, count, oldest;

    if (read_count(reply[0], &rejected) && rejected == 0
        && read_count(reply[1], &count) && read_count(reply[2], &oldest)
        && units.type == Reply::Type::kInteger)
    {
        *applied = units.integer;
        out.kind = ScriptReply::Kind::kVerdict;
    }

    return out;
}

ScriptReply decode_script_reply(const Reply *reply, std::size_t zones,
                                ZoneCount *counts, bool interval,
                                Told told)
{
    ScriptReply out{ScriptReply::Kind::kMalformed, false, {}};

    if (reply[0].type == Reply::Type::kError) {
        out.error = reply[0].text;
        out.kind = ScriptReply::Kind::kError;
        return out;
    }

    std::uint64_t rejected;

    if (!read_count(reply[0], &rejected) || rejected > 1) {
        return out;
    }

    for (std::size_t i = 0; i < zones; i++) {
        const Reply *zone = reply + 1 + kRepliesPerZone * i;
        std::uint64_t over;

        if (!read_count(zone[0], &counts[i].total)
            || !read_count(zone[1], &counts[i].oldest)
            || !read_count(zone[2], &over) || over > 1)
        {
            return out;
        }

        counts[i].over = over == 1;
        counts[i].in_interval = 0;
        counts[i].override = {};
        counts[i].ban_left_ms = 0;
        counts[i].ban_set_ms = 0;

        if (interval
            && !read_count(reply[1 + kRepliesPerZone * zones + i],
                           &counts[i].in_interval))
        {
            return out;
        }
    }

    for (std::size_t i = 0; i < told.items; i++) {
        const Reply *o = told.at + kOverrideReplies * i;
        std::size_t zone = static_cast<std::size_t>(o[1].integer);

        if (zone > zones) {
            return out;
        }

        if (o[3].integer == kToldBanWindow) {
            counts[zone - 1].ban_set_ms = static_cast<std::uint64_t>(
                o[2].integer);
            counts[zone - 1].ban_left_ms = static_cast<std::uint64_t>(
                o[4].integer);
            continue;
        }

        counts[zone - 1].override = {
            true, static_cast<std::uint64_t>(o[2].integer),
            static_cast<std::uint64_t>(o[3].integer),
            static_cast<std::uint64_t>(o[4].integer)};
    }

    out.rejected = rejected == 1;
    out.kind = ScriptReply::Kind::kVerdict;
    return out;
}

ScriptReply decode_lease_reply(const Reply *reply, ZoneCount *count,
                               std::uint64_t *granted, Told told)
{
    ScriptReply out = decode_script_reply(reply, 1, count, false, told);

    if (out.kind == ScriptReply::Kind::kVerdict
        && (!read_count(reply[1 + kRepliesPerZone], granted)
            || (out.rejected && *granted > 0)))
    {
        out.kind = ScriptReply::Kind::kMalformed;
    }

    return out;
}

}  // namespace ratelimit
