// The Redis script that decides a batch of requests, each for all its zones
// at once, and the decoding of its reply.
//
// Call (see ScriptBatch): EVALSHA <sha> <keys> KEY... ZONES ZONE-ARG...
// ENTRY... with the keys of every request in turn, one per zone; then the
// number of distinct zones in the batch, followed by kLayoutPacked or
// kLayoutHash, the layout of the window zones' new keys (a packed string
// or a hash; without a letter, hashes: see scripts/lua/window.lua), and
// kArgsPerZone arguments for each zone: limit; bucket length in ms;
// buckets per window; "s" for a sliding window of buckets, "f" for a
// fixed window (one bucket, the whole window, aligned to Redis time), "c"
// for a calendar zone (below); "1" to enforce the limit, "0" for dry run.
// A calendar zone's bucket length and buckets are two period ends A < B in
// Unix ms, whole numbers from 1, B at most 2^53: the zone counts in the
// period that ends at A while Redis's clock is before A, else in the one
// that ends at B; with the clock past B the whole call is refused
// ("ERR ratelimit: redis's clock is past the calendar periods nginx sent",
// after any other zone error), nothing written.  It is then a fixed window of
// bucket length 1 ms and 1 bucket whose bucket number is the period's end
// less 1: its replies' oldest bucket, the bucket its settles name, and its
// key expires at the period's end; a settle of a request counted in
// another period changes nothing.  Then
// one entry per request: "c" (decide and count the request) or "p" (report,
// count nothing), followed by one byte per zone of the request, in the
// order of its keys: the zone's number among the batch's, from 0.  Or an
// interval peek (the status API's ?interval=): "i", then per zone the
// number K >= 1 of its newest buckets to count, in decimal, each followed
// by "," but the last by ":", then the zone bytes as for "p", e.g.
// "i3,1:\x00\x01".  Or a request of a cost other than 1: "w", then per
// zone its cost, 0 to 2^53, written as an interval peek's K, then the zone
// bytes: "w5,0:\x00\x01" counts 5 units in zone 0 and checks zone 1 (see
// scripts/lua/window.lua for what fits).  Or a settle of one zone: "s", a
// signed number of units, ",", the bucket number the request was counted
// in (of a fixed window: the window's number), ":" and the zone's byte,
// e.g. "s-3,2871:\x00": the units are added to that bucket if it is still
// in the window, never taking it below 0; its reply is 0, the zone's count
// and oldest bucket after it, and the units it applied, a signed number
// (0 if the bucket had left the window: see decode_settle_reply()).  Or a
// lease (src/leases/): "l", the units asked, 0 to 2^53, written as a "w"
// entry's cost, ":" and the zone's byte, e.g. "l40:\x00", of one enforced
// window zone: a lease of several zones, of a GCRA zone or of a dry-run
// zone fails that entry.  With `count` the zone's count in the window now,
// as "c" and "w" read it, it grants g = min(asked, max(limit - count, 0))
// units and counts them as "w" counts a cost of g, in the current bucket
// (of a fixed window: the window), the bucket floor(now / bucket length)
// of the reply's time unless Redis's clock stepped back (then the key's
// newest).  Its reply, 5 elements: 1 if it was refused (g = 0 < asked),
// the zone's count and oldest bucket after it, 1 if the units asked did not
// all fit (count + max(asked, 1) > limit, as "w"'s), and g (see
// decode_lease_reply()).  Units granted and not used go back with a settle
// of -unused to the lease's bucket.
// Side keys (issue 41): a zone of side mode (kZoneEnforcedSide or
// kZoneDryRunSide, then its base B) is one whose subjects may hold an
// override of its limit, in their side key: a count key K's is B
// followed by K from its byte #B on (the zone name's end marked: "rl:a:u"
// has "rl:a+:u").  An entry's use of a side zone reads its side key if
// the zone's marker key exists (of any type): after the count keys, one
// marker key per side zone of the call, in the order of the zones, where
// the layout letter is marked (kLayoutPackedMarked, kLayoutHashMarked).
// Without (a cross_slot call, whose keys span slots) there are none, and
// every use reads its side key.  A zone's marker
// exists while any subject of it in its slot may hold an override (the
// status API keeps it), so that a call of zones without overrides reads
// one key a zone, not one a request.
// The first part of a side key's value of the form "o=L,W,X", decimal
// digits only, is its override, and it is in force when L <= 2^53, 1 <= W
// <= 604800000000000, X <= 2^53 and X = 0 or X > the call's time in ms,
// each number read as Lua reads it, a double (2^53 + 1 reads as 2^53).
// No such part, one out of those bounds or lapsed, a key of another type
// or none: no override.  In force, it replaces the zone's limit for that
// use (its decision, count, lease, settle, reply): a window zone takes
// limit L (W is not read); a GCRA zone takes emission interval W * 1000 /
// L us, its capacity (span) unchanged, and with L = 0 rejects every
// request, its TAT moved by the zone's own interval.  A window zone given
// L = 0 rejects every request too (nothing fits in a count of 0 or more).
// A side zone's own limit may be 0 (nginx's limit=$var of 0), any other
// zone's not (the call is refused): a use under an override is decided
// under it, any other rejects as L = 0 does, a GCRA zone's TAT moved by
// the interval of limit 1.
// Bans (issue 43): a zone of mode kZoneEnforcedBan, then its ban's length
// D in ms (1 to 604800000000000, decimal), ":" and its base, is an
// enforced side zone that bans: a counted request ("c", "w") its limit
// refuses (the override's, where one applies), if above 0, bans the
// subject there (a limit of 0, a plan blocked, refuses without a ban) till
// END = the call's time + D: the side key's value keeps its other parts,
// its parts "b=..." replaced by "b=END", the key expiring at the latest
// end of its parts (PTTL; none where it had none and keeps a part), a
// member of the zone's marker of that score (+inf: none), the marker's
// lapsed members dropped and its expiry its top score's; a marker of
// another type is left alone.  The zone reads its side keys from then on
// in the call.  The first part "b=END" of a side key's value (decimal
// digits) is a ban in force while the call's time < END <= 2^53: every
// side zone that reads it (a zone that bans, or any other of the base)
// takes no request of the subject (over, rejected where enforced, counted
// nowhere, however many units), and sets no ban; a lease grants 0; a
// settle applies; a peek shows it.  A dry-run zone never bans (nginx
// sends it as kZoneDryRunSide).
// Reply: one flat array (nested ones cost Redis a table per request): Redis
// time in ms, then each request's reply in their order, 1 +
// kRepliesPerZone * zones elements: 1 if the request was rejected, then per
// zone the count in the window after this request, the oldest non-empty
// bucket (0 if none), and 1 if this request did not fit in the zone.  An
// interval peek's reply is the one of "p" followed by one count per zone:
// the sum of the bucket fields numbered current - K + 1 to current, where
// current is the bucket a request would be counted in now (the newest
// bucket if Redis's clock stepped back); for a fixed window, its count.  A
// request the script failed on (a key of another type, OOM) has an error in
// place of its first element, that request's alone, and zeros after it.
// After the last request's reply, kOverrideReplies elements for each use
// of a side zone whose side key holds an override in force, in the order
// of the entries and their zones: the entry's number and the zone's among
// its (from 1), L, W, and X - now, or 0 for never; an entry that failed
// tells its overrides too, read before it failed or not.  After a zone's
// override, its ban in force after the entry was decided: the entry's and
// the zone's numbers, D where this entry set it (else 0: it refused the
// entry), kToldBanWindow (0) and END - now; an entry that set a ban where
// its zone read no side keys tells no override (it was not decided under
// one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/sha1.hpp"
#include "limits/override.hpp"
#include "protocol/batch_protocol.hpp"
#include "replies/reply.hpp"

namespace ratelimit {

// The most zones one request may be decided in: bounds the script's argument
// list and the per-request arrays.
constexpr std::size_t kMaxZonesPerRequest = 16;

// A script that may be a connection's first command (the concurrency
// script's EVAL) is at most this long: Redis 7 drops a connection that has
// not authenticated when it sends a longer argument ("Protocol error:
// unauthenticated bulk length"), so a Redis that wants a password the
// configuration lacks would be reported as that instead of NOAUTH.  The
// window script is longer: a PING goes first (CallBatcher::on_link_up).
constexpr std::size_t kMaxScriptSize = 16384;

// The script's text: the parts in src/scripts/lua/, joined and stripped of
// their comments at build time by src/scripts/lua/assemble.pl into
// window_script_text.cpp in the build directory, which defines this.
std::string_view window_script();

// The script's SHA-1 in hex, as EVALSHA wants it.
std::string_view window_script_sha1();

// The same script for `ratelimit_redis cluster ... cross_slot`: flagged
// allow-cross-slot-keys (Redis 7), called with no declared keys and ARGV
// starting with the number of keys, then the keys, then the usual ARGV.
// A node runs it for the keys of every slot it serves, so that a batch is
// a master's requests, not a slot's.  Redis refuses it on an out-of-memory
// server as a whole, and a key not on the node fails its request.
std::string_view cross_slot_script();
std::string_view cross_slot_script_sha1();

struct ZoneCount {
    std::uint64_t total;   // counted in the window after this request
    std::uint64_t oldest;  // oldest non-empty bucket number, 0 if none
    bool over;             // this request did not fit in the zone
    std::uint64_t in_interval = 0;  // of an interval peek: its count
    Override override{};            // the subject's, where one applied
    // The subject's ban in the zone in force after the request (issue 43):
    // ms until it ends, 0 for none; and its length where this request set
    // it, else 0 (it was in force before, and refused the request).
    std::uint64_t ban_left_ms = 0;
    std::uint64_t ban_set_ms = 0;
};

// The overrides a batch's reply tells of (see window_script.hpp): `items`
// of kOverrideReplies elements from `at`, checked by decode_batch_reply().
struct Told {
    const Reply *at = nullptr;
    std::size_t items = 0;
};

struct ScriptReply {
    enum class Kind {
        kVerdict,    // rejected and the zone counts are set
        kError,      // an error reply; `error` holds its text
        kMalformed,  // not the shape the script answers with
    };

    Kind kind;
    bool rejected;
    std::string_view error;  // points into the decoded reply
};

struct BatchReply {
    enum class Kind {
        kReplies,    // now_ms is set; the requests' replies follow it
        kNoScript,   // Redis does not have the script: load it and retry
        kError,      // an error reply; `error` holds its text
        kMalformed,  // not an array of `elements` starting with the time
    };

    Kind kind;
    std::uint64_t now_ms;    // Redis time of the whole batch
    std::string_view error;  // points into the decoded reply
    Told told;               // its tail
};

// Decodes the reply to a batch of `entries` requests whose reply is
// `elements` long before its tail (see ScriptBatch::reply_elements());
// with kReplies, each request's reply starts at reply->element +
// ScriptBatch::reply_offset(i), for decode_script_reply(), and the tail's
// items are in order, each of a request of the batch, a zone number from 1
// to kMaxZonesPerRequest: an override's of a limit to 2^53 and a window
// from 1 ms, or a ban's (window kToldBanWindow) of a length to
// kMaxWindowMs and 1 ms left or more; a batch not `sided`
// (ScriptBatch::sided()) has none.
BatchReply decode_batch_reply(const Reply *reply, std::size_t elements,
                              std::size_t entries, bool sided);

// The overrides `told` tells of request `entry` (from 0), the first at or
// after `*next`, which moves past them: call it for each request in turn.
Told told_of(Told told, std::size_t entry, std::size_t *next);

// Decodes one request's reply for `zones` zones, the 1 + kRepliesPerZone *
// zones elements from `reply` on, and with `interval` (the reply to an
// interval peek) the `zones` counts after them, into the result and
// `counts` (which holds `zones` entries), with the overrides and bans
// `told` tells of it (told_of()).  Never trusts an element: wrong types and negative
// numbers are kMalformed, and so is an override of a zone past `zones`.
ScriptReply decode_script_reply(const Reply *reply, std::size_t zones,
                                ZoneCount *counts, bool interval = false,
                                Told told = {});

// Decodes a settle's reply, the 4 elements from `reply` on: kVerdict with
// the units it applied in *applied (as sent, or fewer where the bucket
// would have gone below 0, or 0 where it had left the window), kError, or
// kMalformed.
ScriptReply decode_settle_reply(const Reply *reply, std::int64_t *applied);

// Decodes a lease's reply, the 5 elements from `reply` on: kVerdict with
// `rejected` (nothing granted of units asked), the zone's count, oldest
// bucket and over in *count, with the override `told` tells of it
// (told_of()), and the units granted in *granted; kError; or kMalformed,
// as decode_script_reply(), and where it was rejected and granted units.
ScriptReply decode_lease_reply(const Reply *reply, ZoneCount *count,
                               std::uint64_t *granted, Told told = {});

}  // namespace ratelimit
