#include "batch_call.hpp"

#include <cmath>

#include "limits/window_rules.hpp"

namespace ratelimit {

namespace {

// The same text as the script's.
const char kBadZoneNumbers[] =
    "ERR ratelimit: a zone's limit, bucket and span must be whole numbers "
    "from 1, the limit at most 2^53, bucket * span at most 604800000000000 "
    "ms";
static_assert(window_rules::kMaxLimit == 9007199254740992
              && window_rules::kMaxWindowMs == 604800000000000);

std::string_view view(redis::String *str)
{
    std::size_t len;
    const char *bytes = redis::StringPtrLen(str, &len);
    return {bytes, len};
}

bool arg_number(redis::String *str, double *out)
{
    std::string_view text = view(str);
    return lua::to_number(text.data(), text.size(), out);
}

// A count of arguments: a whole number, 0 or more.
bool count_of(redis::String *str, std::size_t *out)
{
    double value;

    if (!arg_number(str, &value) || !(value >= 0 && value < 1e9)
        || value != std::floor(value))
    {
        return false;
    }

    *out = static_cast<std::size_t>(value);
    return true;
}

// A zone's numbers are what nginx can send (window_rules.hpp): NaN, an
// infinity or a bucket of 1e-300 made an expiry time Redis would not take,
// and a key written with none.
const char *parse_zone(redis::String *const *args, double now_ms,
                       ZoneParams *zone)
{
    if (!arg_number(args[0], &zone->limit)
        || !arg_number(args[1], &zone->bucket_ms)
        || !arg_number(args[2], &zone->span)
        || !window_rules::zone_numbers_valid(zone->limit, zone->bucket_ms,
                                             zone->span))
    {
        return kBadZoneNumbers;
    }

    zone->fixed = view(args[3]) == "f";
    zone->enforce = view(args[4]) == "1";
    zone->bucket = std::floor(now_ms / zone->bucket_ms);
    zone->first_bucket = window_rules::first_bucket(zone->bucket,
                                                    zone->span);
    lua::format(zone->bucket, zone->bucket_field);
    lua::format(window_rules::expiry_ms(zone->bucket, zone->span,
                                        zone->bucket_ms),
                zone->expire_at);
    return nullptr;
}

// "i" then the bucket counts, "," between them, ":" after: one per zone,
// each from 1 to the most buckets a window has (of 1 ms each).
bool parse_interval(std::string_view text, Entry *entry)
{
    std::size_t colon = text.find(':');

    if (colon == std::string_view::npos) {
        return false;
    }

    entry->zones = text.substr(colon + 1);
    std::string_view counts = text.substr(1, colon - 1);
    entry->wanted.clear();

    while (true) {
        std::size_t comma = counts.find(',');
        std::string_view digits = counts.substr(0, comma);
        double wanted;

        if (digits.empty()
            || digits.find_first_not_of("0123456789") != digits.npos
            || !lua::to_number(digits.data(), digits.size(), &wanted)
            || wanted < 1
            || wanted > static_cast<double>(window_rules::kMaxWindowMs))
        {
            return false;
        }

        entry->wanted.push_back(wanted);

        if (comma == std::string_view::npos) {
            break;
        }

        counts.remove_prefix(comma + 1);
    }

    return entry->wanted.size() == entry->zones.size();
}

}  // namespace

long long declared_keys(redis::String **argv, int argc) noexcept
{
    std::size_t keys;

    if (argc < 2 || !count_of(argv[1], &keys)
        || keys > static_cast<std::size_t>(argc - 2))
    {
        return -1;
    }

    return static_cast<long long>(keys);
}

const char *BatchCall::parse(redis::String **argv, int argc, double now)
{
    long long declared = declared_keys(argv, argc);
    std::size_t zone_count;

    if (declared < 0) {
        return "ERR ratelimit: numkeys is not a count of the keys given";
    }

    now_ms = now;
    keys = argv + 2;
    key_count = static_cast<std::size_t>(declared);
    std::size_t at = 2 + key_count;

    if (at >= static_cast<std::size_t>(argc)
        || !count_of(argv[at], &zone_count)
        || zone_count > (argc - at - 1) / 5)
    {
        return "ERR ratelimit: the number of zones is missing or too large";
    }

    zones.resize(zone_count);
    at++;

    for (ZoneParams &zone : zones) {
        if (const char *error = parse_zone(argv + at, now, &zone)) {
            return error;
        }

        at += 5;
    }

    entries.resize(static_cast<std::size_t>(argc) - at);
    std::size_t keys_named = 0;
    reply_size = 1;

    for (Entry &entry : entries) {
        std::string_view text = view(argv[at++]);
        entry.mode = text.empty() ? '\0' : text[0];
        entry.zones = text.empty() ? text : text.substr(1);

        if (entry.mode == 'i' && !parse_interval(text, &entry)) {
            return "ERR ratelimit: malformed interval peek";
        }

        if (entry.zones.empty()) {
            return "ERR ratelimit: an entry names no zone";
        }

        for (char zone : entry.zones) {
            if (static_cast<unsigned char>(zone) >= zones.size()) {
                return "ERR ratelimit: an entry names a zone not given";
            }
        }

        entry.solo = entry.mode == 'c' && entry.zones.size() == 1;
        keys_named += entry.zones.size();
        reply_size += entry.reply_size();
    }

    if (keys_named != key_count) {
        return "ERR ratelimit: the entries name other than numkeys keys";
    }

    return nullptr;
}

}  // namespace ratelimit
