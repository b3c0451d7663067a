#include "zones/batch.hpp"

#include <algorithm>
#include <cmath>

#include "limits/window_rules.hpp"
#include "protocol/batch_protocol.hpp"
#include "zones/packed_window.hpp"

namespace ratelimit {

namespace {

// The same texts as the script's.
const char kBadZoneNumbers[] =
    "ERR ratelimit: a zone's limit, bucket and span must be whole numbers "
    "from 1, the limit at most 2^53, bucket * span at most 604800000000000 "
    "ms";
const char kUnknownZone[] = "ERR ratelimit: unknown zone kind or mode";
static_assert(window_rules::kMaxLimit == 9007199254740992
              && window_rules::kMaxWindowMs == 604800000000000);

bool number(std::string_view text, double *out)
{
    return lua::to_number(text.data(), text.size(), out);
}

// Whether `text` is the one character `code`.
bool is(std::string_view text, char code)
{
    return text == std::string_view(&code, 1);
}

}  // namespace

// NaN, an infinity or a bucket of 1e-300 made an expiry time Redis would
// not take, and a key written with none; an unknown kind was read as a
// sliding window, an unknown mode as dry run.  The mode is read first, as
// the script reads it: a side mode's limit may be 0 (zone_numbers_valid()),
// but the numbers' error comes before the mode's.
const char *parse_zone(const std::string_view *args, double now_ms,
                       bool packed, ZoneParams *zone)
{
    // Modes: enforced or dry run, one byte; or either with side keys, its
    // letter followed by the zone's side key base (kept as a view: the
    // argument outlives the call).
    std::string_view mode = args[4].substr(0, 1);
    zone->side_base = args[4].size() > 1 ? args[4].substr(1) : "";
    zone->enforce = is(mode, kZoneEnforced) || is(mode, kZoneEnforcedSide);
    bool side = !zone->side_base.empty()
                && (is(mode, kZoneEnforcedSide) || is(mode, kZoneDryRunSide));
    bool known = zone->side_base.empty()
                     ? is(mode, kZoneEnforced) || is(mode, kZoneDryRun)
                     : side;

    if (!number(args[0], &zone->limit) || !number(args[1], &zone->bucket_ms)
        || !number(args[2], &zone->span)
        || !window_rules::zone_numbers_valid(zone->limit, zone->bucket_ms,
                                             zone->span, side))
    {
        return kBadZoneNumbers;
    }

    if (!(is(args[3], kZoneSliding) || is(args[3], kZoneFixed)
          || is(args[3], kZoneGcra))
        || !known)
    {
        return kUnknownZone;
    }

    // A side zone of limit 0 admits nothing (over()): its GCRA interval is
    // that of limit 1, finite, which only a settle moves its TAT by.
    zone->fixed = is(args[3], kZoneFixed);
    zone->gcra = is(args[3], kZoneGcra)
                     ? zone->bucket_ms * 1000 / std::max(zone->limit, 1.0)
                     : 0;
    zone->packed = packed && packed_fits(zone->fixed, zone->span);
    zone->bucket = std::floor(now_ms / zone->bucket_ms);
    lua::format(zone->bucket, zone->bucket_field);
    return nullptr;
}

}  // namespace ratelimit
