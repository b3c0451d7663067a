#include "zones/batch.hpp"

#include <algorithm>
#include <cmath>

#include "limits/window_rules.hpp"
#include "protocol/batch_protocol.hpp"
#include "scripts/decide_command.hpp"
#include "zones/packed_window.hpp"

namespace ratelimit {

namespace {

// The same texts as the script's (as is decide_command.hpp's
// kZoneModeRefused, which nginx reads: t/00-protocol.t).
const char kBadZoneNumbers[] =
    "ERR ratelimit: a zone's limit, bucket and span must be whole numbers "
    "from 1, the limit at most 2^53, bucket * span at most 604800000000000 "
    "ms";
const char kBadCalendarEnds[] =
    "ERR ratelimit: a calendar zone's period ends must be whole numbers "
    "from 1 to 2^53, the first before the second";
const char kPastCalendar[] =
    "ERR ratelimit: redis's clock is past the calendar periods nginx sent";
static_assert(window_rules::kMaxLimit == 9007199254740992
              && window_rules::kMaxWindowMs == 604800000000000
              && window_rules::kMaxPeriodEndMs == 9007199254740992);

bool number(std::string_view text, double *out)
{
    return lua::to_number(text.data(), text.size(), out);
}

// Whether `text` is the one character `code`.
bool is(std::string_view text, char code)
{
    return text == std::string_view(&code, 1);
}

// The fixed window a calendar zone is.
constexpr char kCalendarKind = kZoneFixed;

// The side mode a zone that bans is.
constexpr char kEnforcedSide = kZoneEnforcedSide;

}  // namespace

// NaN, an infinity or a bucket of 1e-300 made an expiry time Redis would
// not take, and a key written with none; an unknown kind was read as a
// sliding window, an unknown mode as dry run.  The mode is read first, as
// the script reads it: a side mode's limit may be 0 (zone_numbers_valid()),
// but the numbers' error comes before the mode's.  A calendar zone's
// bucket and span are two period ends, checked first (window_rules.hpp,
// calendar_end()): the zone is then a fixed window of 1 ms buckets and
// span 1 whose bucket, the time `at`, is the last ms of the period Redis's
// clock chooses, or -1 where the clock is past both, which refuses the
// call after any other zone error.  Any other zone's `at` is now.
const char *parse_zone(const std::string_view *args, double now_ms,
                       bool packed, ZoneParams *zone)
{
    std::string_view kind = args[3];
    double at = now_ms;
    bool numbers = number(args[1], &zone->bucket_ms)
                   && number(args[2], &zone->span);

    if (is(kind, kZoneCalendar)) {
        if (!numbers
            || !window_rules::calendar_ends_valid(zone->bucket_ms,
                                                  zone->span))
        {
            return kBadCalendarEnds;
        }

        at = window_rules::calendar_end(now_ms, zone->bucket_ms, zone->span)
             - 1;
        zone->bucket_ms = zone->span = 1;
        kind = std::string_view(&kCalendarKind, 1);
    }

    // Modes: enforced or dry run, one byte; or either with side keys, its
    // letter followed by the zone's side key base (kept as a view: the
    // argument outlives the call).
    std::string_view mode = args[4].substr(0, 1);
    zone->side_base = args[4].size() > 1 ? args[4].substr(1) : "";
    zone->ban_ms = 0;
    zone->barred = false;

    // A zone that bans: its ban's length and kNumbersEnd before its base,
    // as the script's string.match(base, '^(%d+):(.+)$') takes them; a
    // malformed one is an unknown mode.
    if (is(mode, kZoneEnforcedBan)) {
        std::size_t end = zone->side_base.find(kNumbersEnd);
        std::string_view length = zone->side_base.substr(0, end);
        bool digits = end != std::string_view::npos && end > 0
                      && end + 1 < zone->side_base.size()
                      && length.find_first_not_of("0123456789")
                             == std::string_view::npos;
        bool taken = digits && number(length, &zone->ban_ms)
                     && zone->ban_ms >= 1
                     && zone->ban_ms <= window_rules::kMaxWindowMs
                     && zone->ban_ms == std::floor(zone->ban_ms);
        mode = taken ? std::string_view(&kEnforcedSide, 1) : "";
        zone->side_base = taken ? zone->side_base.substr(end + 1) : "";
        zone->ban_ms = taken ? zone->ban_ms : 0;
    }

    zone->enforce = is(mode, kZoneEnforced) || is(mode, kZoneEnforcedSide);
    bool side = !zone->side_base.empty()
                && (is(mode, kZoneEnforcedSide) || is(mode, kZoneDryRunSide));
    bool known = zone->side_base.empty()
                     ? is(mode, kZoneEnforced) || is(mode, kZoneDryRun)
                     : side;

    if (!numbers || !number(args[0], &zone->limit)
        || !window_rules::zone_numbers_valid(zone->limit, zone->bucket_ms,
                                             zone->span, side))
    {
        return kBadZoneNumbers;
    }

    if (!(is(kind, kZoneSliding) || is(kind, kZoneFixed)
          || is(kind, kZoneGcra))
        || !known)
    {
        return kZoneModeRefused;
    }

    if (at < 0) {
        return kPastCalendar;
    }

    // A side zone of limit 0 admits nothing (over()): its GCRA interval is
    // that of limit 1, finite, which only a settle moves its TAT by.
    zone->fixed = is(kind, kZoneFixed);
    zone->gcra = is(kind, kZoneGcra)
                     ? zone->bucket_ms * 1000 / std::max(zone->limit, 1.0)
                     : 0;
    zone->packed = packed && packed_fits(zone->fixed, zone->span);
    zone->bucket = std::floor(at / zone->bucket_ms);
    lua::format(zone->bucket, zone->bucket_field);
    return nullptr;
}

}  // namespace ratelimit
