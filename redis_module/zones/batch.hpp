// A call of RATELIMIT.DECIDE as the zone kinds decide it: each zone's
// parameters (read once per call, as the script does) and the requests'
// entries (see scripts/window_script.hpp for their syntax), their keys
// named by their place among the call's (store/store.hpp).  Read from the
// command's arguments by command/batch_call.hpp, a zone's by parse_zone().
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "protocol/batch_protocol.hpp"
#include "store/lua_number.hpp"

namespace ratelimit {

// Numbers are doubles, as in the script (see lua_number.hpp).
struct ZoneParams {
    double limit;           // 0 only in a side mode: nothing fits
                            // (over()) but under an override
    double bucket_ms;       // of a calendar zone, 1
    double span;            // buckets per window; of a calendar zone, 1
    bool fixed;             // a fixed window, or a calendar zone
    double gcra;            // a GCRA zone's emission interval (us), else 0;
                            // its `span` is its capacity, 1 + burst; of
                            // limit 0, that of limit 1 (a settle's turns)
    bool enforce;
    double ban_ms;          // of kZoneEnforcedBan: the ban's length, ms
                            // (1 to 604800000000000); else 0
    bool barred;            // a zone as an entry applies it whose
                            // subject's ban is in force: nothing fits
                            // (side_value.hpp); the call's zones never
    std::string_view side_base;  // of a side mode (kZoneEnforcedSide or
                                 // kZoneDryRunSide): the base of its
                                 // subjects' side keys (side_value.hpp),
                                 // never empty; else empty
    bool packed;            // its new keys are packed strings
                            // (zones/packed_window.hpp), else hashes
    double bucket;          // the current bucket: now / bucket_ms,
                            // floored; of a calendar zone, the last ms of
                            // its period
    char bucket_field[lua::kMaxText];  // `bucket` as text, its field name
};

// A zone's kArgsPerZone arguments as text (limit, bucket in ms, buckets,
// kind, mode; of a calendar zone, two period ends in place of bucket and
// buckets) read into `zone` at Redis time `now_ms` as the script reads
// them, its new keys packed strings where the call asks (`packed`) and
// they fit; a calendar zone as the fixed window of its period that Redis's
// clock chooses (window_rules.hpp, calendar_end()): nullptr, or the error
// that refuses the whole call (the script's text) where they are not what
// nginx sends: period ends calendar_ends_valid() refuses, numbers
// zone_numbers_valid() refuses (limit 0 but in a side mode), an unknown
// kind or mode (a side mode with no base, or another mode with one), and
// then a clock past both period ends.
const char *parse_zone(const std::string_view *args, double now_ms,
                       bool packed, ZoneParams *zone);

struct Entry {
    char mode;                   // 'c' counts 1, 'w' its costs; 'i'
                                 // interval peek; 's' settle; 'l' lease;
                                 // else peek
    std::string_view zones;      // a byte per zone: its number; of an
                                 // 's', its last byte, even a malformed
                                 // one's (the script's shape())
    std::vector<double> wanted;  // of 'i': buckets to sum, per zone
    std::vector<double> costs;   // of 'w': units to count, per zone
    double delta, at;            // of 's': units to add (signed), to the
                                 // bucket (fixed: window) of this number
    double asked;                // of 'l': units asked, 0 to 2^53
    const char *error;           // of a malformed 's', of an 'l' that
                                 // fails: its reply's error
    bool solo;                   // the script's fast path: solo()

    // The units a counted request counts in its zone `i`.
    double cost(std::size_t i) const
    {
        return mode == kEntryCosts ? costs[i] : 1;
    }

    // The keys it takes: a settle takes one, even a malformed one; a lease
    // one per byte after its first ':', even where that fails it.
    std::size_t keys() const
    {
        return mode == kEntrySettle ? 1 : zones.size();
    }

    // The length of the request's reply: a lease's ends with the units it
    // granted.
    std::size_t reply_size() const
    {
        return 1 + kRepliesPerZone * keys()
               + (mode == kEntryInterval ? kIntervalRepliesPerZone * keys()
                                         : 0)
               + (mode == kEntryLease ? kLeaseGrantReplies : 0);
    }
};

// Whether the script's run() takes `entry`, of a call of `zones` (its
// solo table): a counted request of one zone, but not of a side zone of
// limit 0, which admits a request only under its subject's override (the
// careful path applies that or rejects; a GCRA zone's fast path reads no
// limit).
inline bool solo(const Entry &entry, const std::vector<ZoneParams> &zones)
{
    return entry.mode == kEntryCount && entry.zones.size() == 1
           && zones[static_cast<unsigned char>(entry.zones[0])].limit > 0;
}

struct Batch {
    double now_ms;
    double now_us;  // the same Redis time, for GCRA zones
    std::vector<ZoneParams> zones;
    std::vector<Entry> entries;
    std::size_t reply_size;  // of the requests, before the overrides'
    std::size_t count_keys = 0;  // the keys the entries count in, first
    bool marked = false;  // then one marker key per side zone, in their
                          // order (a marked layout letter); without, none
};

}  // namespace ratelimit
