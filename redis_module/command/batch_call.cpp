#include "command/batch_call.hpp"

#include <cmath>

#include "limits/window_rules.hpp"
#include "protocol/batch_protocol.hpp"
#include "scripts/decide_command.hpp"

namespace ratelimit {

namespace {

std::string_view view(redis::String *str)
{
    std::size_t len;
    const char *bytes = redis::StringPtrLen(str, &len);
    return {bytes, len};
}

bool text_number(std::string_view text, double *out)
{
    return lua::to_number(text.data(), text.size(), out);
}

// A count of arguments: a whole number, 0 or more.
bool count_of(std::string_view text, std::size_t *out)
{
    double value;

    if (!text_number(text, &value) || !(value >= 0 && value < 1e9)
        || value != std::floor(value))
    {
        return false;
    }

    *out = static_cast<std::size_t>(value);
    return true;
}

// Whether `text` is a decimal: digits only, at least one.
bool decimal(std::string_view text)
{
    return !text.empty() && text.find_first_not_of("0123456789") == text.npos;
}

// The number of zones as the script reads it (batch_protocol.hpp): a
// number ("3": hashes), or one followed by the layout letter of the window
// zones' new keys, whether packed strings ("3p"), in its marked form
// where the call names marker keys ("3P").
bool zone_count_of(redis::String *str, std::size_t *out, bool *packed,
                   bool *marked)
{
    std::string_view text = view(str);
    *packed = false;
    *marked = false;

    if (count_of(text, out)) {
        return true;
    }

    char layout = text.empty() ? '\0' : text.back();
    *marked = layout == kLayoutPackedMarked || layout == kLayoutHashMarked;
    *packed = layout == kLayoutPacked || layout == kLayoutPackedMarked;

    if (!*marked && layout != kLayoutPacked && layout != kLayoutHash) {
        return false;
    }

    text.remove_suffix(1);
    return count_of(text, out);
}

// The entry's letter, then a decimal per zone, "," between them, ":"
// after, then the zone bytes ("i": the bucket counts; "w": the costs): the
// zones into `entry`, the numbers into `out`, each from `least` to `most`.
bool parse_numbers(std::string_view text, double least, double most,
                   Entry *entry, std::vector<double> *out)
{
    std::size_t colon = text.find(kNumbersEnd);

    if (colon == std::string_view::npos) {
        return false;
    }

    entry->zones = text.substr(colon + 1);
    std::string_view list = text.substr(1, colon - 1);
    out->clear();

    while (true) {
        std::size_t comma = list.find(kNumberNext);
        std::string_view digits = list.substr(0, comma);
        double number;

        if (!decimal(digits)
            || !lua::to_number(digits.data(), digits.size(), &number)
            || number < least || number > most)
        {
            return false;
        }

        out->push_back(number);

        if (comma == std::string_view::npos) {
            break;
        }

        list.remove_prefix(comma + 1);
    }

    return out->size() == entry->zones.size();
}

// "s" DELTA "," BUCKET ":" and one zone byte (see window_script.hpp):
// DELTA a decimal with or without "-", at most 2^53 either way, BUCKET a
// decimal.  False if not.  Its zone is its last byte, whatever the rest,
// as the script's shape() takes it (a failed settle tells its override).
bool parse_settle(std::string_view text, Entry *entry)
{
    std::size_t comma = text.find(kNumberNext);
    std::size_t colon = text.find(kNumbersEnd);
    entry->zones = text.substr(text.size() - 1);

    if (comma == text.npos || colon == text.npos || colon < comma
        || text.size() != colon + 2)
    {
        return false;
    }

    std::string_view delta = text.substr(1, comma - 1);
    std::string_view at = text.substr(comma + 1, colon - comma - 1);

    if (!decimal(delta.substr(delta.substr(0, 1) == "-" ? 1 : 0))
        || !decimal(at))
    {
        return false;
    }

    return lua::to_number(delta.data(), delta.size(), &entry->delta)
           && std::fabs(entry->delta)
                  <= static_cast<double>(window_rules::kMaxLimit)
           && lua::to_number(at.data(), at.size(), &entry->at);
}

// "l" UNITS ":" and one zone byte (see window_script.hpp), in a call of
// `zones`: the lease's error, as the script's lease() raises it, or
// nullptr.  Its zones are the bytes after the first ':', whatever the rest.
const char *parse_lease(std::string_view text,
                        const std::vector<ZoneParams> &zones, Entry *entry)
{
    std::size_t colon = text.find(kNumbersEnd);

    if (colon == text.npos) {
        entry->zones = {};
        return "ERR ratelimit: malformed lease";
    }

    entry->zones = text.substr(colon + 1);
    std::string_view list = text.substr(1, colon - 1);

    if (list.empty() || list.find_first_not_of("0123456789,") != list.npos) {
        return "ERR ratelimit: malformed lease";
    }

    if (entry->zones.size() > 1 || list.find(kNumberNext) != list.npos) {
        return "ERR ratelimit: a lease is of one zone";
    }

    if (entry->zones.size() != 1
        || !lua::to_number(list.data(), list.size(), &entry->asked)
        || entry->asked > static_cast<double>(window_rules::kMaxLimit)
        || static_cast<unsigned char>(entry->zones[0]) >= zones.size())
    {
        return "ERR ratelimit: malformed lease";
    }

    const ZoneParams &zone = zones[static_cast<unsigned char>(
        entry->zones[0])];

    if (zone.gcra != 0) {
        return "ERR ratelimit: lease of a GCRA zone";
    }

    return zone.enforce ? nullptr : "ERR ratelimit: lease of a dry-run zone";
}

// One entry (see window_script.hpp) of a call of `zones`; on a malformed
// one returns the error to answer, else nullptr.  A malformed settle is the
// settle's error, not the call's, as in the script, and so is any error of
// a lease.
const char *parse_entry(std::string_view text,
                        const std::vector<ZoneParams> &zones, Entry *entry)
{
    std::size_t zone_count = zones.size();
    entry->mode = text.empty() ? '\0' : text[0];
    entry->zones = text.empty() ? text : text.substr(1);
    entry->error = nullptr;
    entry->solo = false;

    if (entry->mode == kEntryLease) {
        entry->error = parse_lease(text, zones, entry);
        return nullptr;
    }

    if (entry->mode == kEntrySettle && !parse_settle(text, entry)) {
        entry->error = "ERR ratelimit: malformed settle";
        return nullptr;
    }

    // Each bucket count from 1 to the most buckets a window has (of 1 ms
    // each); each cost from 0 to the largest limit.
    if (entry->mode == kEntryInterval
        && !parse_numbers(text, 1,
                          static_cast<double>(window_rules::kMaxWindowMs),
                          entry, &entry->wanted))
    {
        return "ERR ratelimit: malformed interval peek";
    }

    if (entry->mode == kEntryCosts
        && !parse_numbers(text, 0,
                          static_cast<double>(window_rules::kMaxLimit), entry,
                          &entry->costs))
    {
        return "ERR ratelimit: malformed costs";
    }

    if (entry->zones.empty()) {
        return "ERR ratelimit: an entry names no zone";
    }

    for (char zone : entry->zones) {
        if (static_cast<unsigned char>(zone) >= zone_count) {
            return "ERR ratelimit: an entry names a zone not given";
        }
    }

    entry->solo = solo(*entry, zones);
    return nullptr;
}

}  // namespace

long long declared_keys(redis::String **argv, int argc) noexcept
{
    std::size_t keys;

    if (argc < 2 || !count_of(view(argv[1]), &keys)
        || keys > static_cast<std::size_t>(argc - 2))
    {
        return -1;
    }

    return static_cast<long long>(keys);
}

const char *BatchCall::parse(redis::String **argv, int argc, double now,
                             double now_in_us)
{
    long long declared = declared_keys(argv, argc);
    std::size_t zone_count;
    bool packed;

    if (declared < 0) {
        return "ERR ratelimit: numkeys is not a count of the keys given";
    }

    now_ms = now;
    now_us = now_in_us;
    keys = argv + 2;
    key_count = static_cast<std::size_t>(declared);
    std::size_t at = 2 + key_count;

    if (at >= static_cast<std::size_t>(argc)
        || !zone_count_of(argv[at], &zone_count, &packed, &marked)
        || zone_count > (argc - at - 1) / kArgsPerZone)
    {
        return kZoneCountRefused;
    }

    zones.resize(zone_count);
    at++;

    for (ZoneParams &zone : zones) {
        std::string_view args[kArgsPerZone];

        for (std::string_view &arg : args) {
            arg = view(argv[at++]);
        }

        if (const char *error = parse_zone(args, now, packed, &zone)) {
            return error;
        }
    }

    entries.resize(static_cast<std::size_t>(argc) - at);
    count_keys = 0;
    reply_size = 1;

    for (Entry &entry : entries) {
        if (const char *error = parse_entry(view(argv[at++]), zones,
                                            &entry))
        {
            return error;
        }

        count_keys += entry.keys();
        reply_size += entry.reply_size();
    }

    // With marker keys, one a side zone after the count keys.
    std::size_t markers = 0;

    for (const ZoneParams &zone : zones) {
        markers += marked && !zone.side_base.empty() ? 1 : 0;
    }

    return count_keys + markers == key_count
               ? nullptr
               : "ERR ratelimit: the entries name other than numkeys keys";
}

}  // namespace ratelimit
