// A subject's limit override (issue 41) and its ban (issue 43), read from
// its side key's value (keys/subject_key.hpp) as the window script reads
// them, a zone as an entry applies it under them (see window_script.hpp,
// "Side keys"), and the value a ban writes.
#pragma once

#include <string>
#include <string_view>

#include "zones/batch.hpp"

namespace ratelimit {

// The override part "o=L,W,X" of a side key's value.
struct Override {
    bool in_force;     // else no override: the rest is 0
    double limit;      // L, 0 to 2^53
    double window_ms;  // W, 1 to 604800000000000 (a GCRA zone's)
    double lapse_ms;   // X, the Redis time in ms it lapses at; 0 never
};

// The override of side key value `value` at Redis time `now_ms`: the
// first part (between kSidePartNext's) that is exactly "o=" and three
// runs of decimal digits separated by kNumberNext, as the script's
// string.match(';' .. v .. ';', ';o=(%d+),(%d+),(%d+);') finds it, its
// numbers as tonumber() reads them.  Not in force where there is no such
// part, where that first one is out of bounds (a run too long for a
// double among them) or where it lapsed (X != 0 and X <= now_ms): no
// later part is looked at.
Override read_override(std::string_view value, double now_ms) noexcept;

// The end (Redis ms) of the ban in force in side key value `value` at
// `now_ms`: the first part that is exactly "b=" and a run of decimal
// digits, as the script's string.match(';' .. v .. ';', ';b=(%d+);')
// finds it, read as tonumber() reads it; in force where now_ms < END <=
// 2^53, else (none, out of bounds, ended) 0.
double read_ban(std::string_view value, double now_ms) noexcept;

// `value` with its ban parts (those starting "b=") dropped and the part
// "b=END" appended, its empty parts dropped (the script's gmatch of
// '[^;]+'), and in `kept` whether any part was kept.
std::string with_ban(std::string_view value, double end_ms, bool *kept);

// The side key of count key `key` in a zone of side key base `base` (not
// empty): `base` followed by `key` from its byte #base on, 1-based, as
// the script's base .. string.sub(key, #base) makes it ("rl:a+" and
// "rl:a:u" make "rl:a+:u"; a key shorter than that, `base` alone).
std::string side_key(std::string_view base, std::string_view key);

// `zone` as an entry applies it under override `o`, in force: a window
// zone takes limit L (L = 0: nothing fits, need > 0 - count); a GCRA
// zone, limit L and emission interval W * 1000 / L us, its capacity kept,
// or with L = 0 its own interval (the turns a settle moves), over() then
// refusing every request.
ZoneParams overridden(const ZoneParams &zone, const Override &o);

}  // namespace ratelimit
