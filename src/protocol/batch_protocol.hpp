// The wire codes of the window script's batches and the widths of its reply
// (see window_script.hpp for the call and the reply they make up): written
// by nginx (script_batch.cpp), read by the script (scripts/lua/, whose
// @name@ placeholders the build fills in from this file) and by the Redis
// module's command (redis_module/batch_call.cpp).  No C++ file writes or
// reads them as literals (t/00-protocol.t).
#pragma once

#include <cstddef>

namespace ratelimit {

// An entry's first byte: what it asks of its zones.
constexpr char kEntryCount = 'c';     // decide, count 1 unit in each zone
constexpr char kEntryPeek = 'p';      // decide, count nothing
constexpr char kEntryInterval = 'i';  // a peek, then the newest buckets
constexpr char kEntryCosts = 'w';     // decide, count each zone's cost
constexpr char kEntrySettle = 's';    // add signed units to a bucket
constexpr char kEntryLease = 'l';     // grant units of one window zone

// An entry's numbers (after its first byte, before its zone bytes): each
// followed by kNumberNext, the last by kNumbersEnd.
constexpr char kNumberNext = ',';
constexpr char kNumbersEnd = ':';

// The number of zones (the argument after the keys) is followed by a
// letter: the layout of the window zones' new keys, a packed string or a
// hash (without one, as the release before sends it: hashes).  The Redis
// module of the release before refuses such a count as a whole, before
// any key.  A batch that names marker keys writes the letter's marked form
// ("3P"; the release of issue 40's module refuses it too).
constexpr char kLayoutPacked = 'p';
constexpr char kLayoutHash = 'h';
constexpr char kLayoutPackedMarked = 'P';
constexpr char kLayoutHashMarked = 'H';

// A zone's arguments: limit, bucket length in ms, buckets per window (of a
// GCRA zone: 1 + burst; of a calendar zone, in place of these two, the
// ends A < B in Unix ms of two periods in a row, Redis counting in the
// first while its clock is before A, else in the second: see
// window_script.hpp), its kind, and its mode: enforced or dry run; of a
// zone whose subjects may have side keys (an override of their limit,
// keys/subject_key.hpp), the side mode's letter followed by the zone's
// side key base, its count keys' first bytes up to the zone name and a
// mark ("rl:api+": see window_script.hpp and keys/subject_key.hpp).  The
// limit is a whole number from 1, or of a side mode's zone from 0 (only
// its subjects under an override are admitted).  An enforced side zone
// that bans (issue 43) has the mode kZoneEnforcedBan, then the ban's
// length D in ms (1 to 604800000000000, decimal), kNumbersEnd and its side
// key base ("43600000:rl:api+"); a dry-run zone never bans, and is sent
// as kZoneDryRunSide.
constexpr std::size_t kArgsPerZone = 5;
constexpr char kZoneSliding = 's';
constexpr char kZoneFixed = 'f';
constexpr char kZoneGcra = 'g';
constexpr char kZoneCalendar = 'c';
constexpr char kZoneEnforced = '1';
constexpr char kZoneDryRun = '0';
constexpr char kZoneEnforcedSide = '3';
constexpr char kZoneDryRunSide = '2';
constexpr char kZoneEnforcedBan = '4';

// A side key's value, a string: parts separated by kSidePartNext, each a
// tag, kSideTagEnd and its numbers separated by kNumberNext.  The override
// part, "o=L,W,X": the subject's limit L (0 to 2^53), the window W in ms
// it was given for (1 to 604800000000000), and the Redis time X in ms at
// which it lapses (0: never).  The ban part, "b=END": the Redis time in
// ms at which the subject's ban in the zone ends (in force while END >
// now).  Unknown parts are skipped.
constexpr char kSidePartNext = ';';
constexpr char kSideTagEnd = '=';
constexpr char kSideOverride = 'o';
constexpr char kSideBan = 'b';

// A request's reply: `rejected`, then kRepliesPerZone elements per zone
// (the count after it, the oldest bucket, `over`); an interval peek's then
// kIntervalRepliesPerZone more per zone, its counts; a lease's then
// kLeaseGrantReplies more, the units granted.  A settle's is a request's of
// one zone whose last element is the units it applied.  After the last
// request's reply, kOverrideReplies elements per override in force that
// an entry was decided under: the entry's number and the zone's among the
// entry's (each from 1), the override's limit, its window in ms and the
// ms until it lapses (0: never).  A ban's item in the same tail (issue 43)
// has the window kToldBanWindow, never an override's: the entry's and
// zone's numbers, the ban's length D in ms where this entry set it (else
// 0: it was in force before, and the entry refused by it), the window 0,
// and the ms until it ends (D where set).  An entry's items come in the
// order of its zones, of one zone the override's before the ban's.
constexpr std::size_t kRepliesPerZone = 3;
constexpr std::size_t kIntervalRepliesPerZone = 1;
constexpr std::size_t kLeaseGrantReplies = 1;
constexpr std::size_t kOverrideReplies = 5;
constexpr std::size_t kToldBanWindow = 0;

}  // namespace ratelimit
