// The Redis script that decides a batch of requests, each for all its zones
// at once, and the decoding of its reply.
//
// Call (see ScriptBatch): EVALSHA <sha> <keys> KEY... ZONES ZONE-ARG...
// ENTRY... with the keys of every request in turn, one per zone; then the
// number of distinct zones in the batch and kArgsPerZone arguments for
// each: limit; bucket length in ms; buckets per window; "s" for a sliding
// window of buckets, "f" for a fixed window (one bucket, the whole window,
// aligned to Redis time); "1" to enforce the limit, "0" for dry run.  Then
// one entry per request: "c" (decide and count the request) or "p" (report,
// count nothing), followed by one byte per zone of the request, in the
// order of its keys: the zone's number among the batch's, from 0.
// Reply: an array with one reply per request, in their order, each either
// an error (that request's alone) or an array of integers, 2 +
// kRepliesPerZone * zones long: Redis time in ms, 1 if the request was
// rejected, then per zone the count in the window after this request, the
// oldest non-empty bucket (0 if none), and 1 if this request did not fit in
// the zone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <hiredis/hiredis.h>

#include "sha1.hpp"

namespace ratelimit {

constexpr std::size_t kArgsPerZone = 5;
constexpr std::size_t kRepliesPerZone = 3;

// The most zones one request may be decided in: bounds the script's argument
// list and the per-request arrays.
constexpr std::size_t kMaxZonesPerRequest = 16;

std::string_view window_script();

// The script's SHA-1 in hex, as EVALSHA wants it.
std::string_view window_script_sha1();

struct ZoneCount {
    std::uint64_t total;   // counted in the window after this request
    std::uint64_t oldest;  // oldest non-empty bucket number, 0 if none
    bool over;             // this request did not fit in the zone
};

struct ScriptReply {
    enum class Kind {
        kVerdict,    // now_ms, rejected and the zone counts are set
        kError,      // an error reply; `error` holds its text
        kMalformed,  // not the shape the script answers with
    };

    Kind kind;
    std::uint64_t now_ms;
    bool rejected;
    std::string_view error;  // points into the decoded reply
};

struct BatchReply {
    enum class Kind {
        kReplies,    // an array of one reply per request
        kNoScript,   // Redis does not have the script: load it and retry
        kError,      // an error reply; `error` holds its text
        kMalformed,  // not an array of one element per request
    };

    Kind kind;
    std::string_view error;  // points into the decoded reply
};

// Decodes the reply to a batch of `requests` requests; with kReplies,
// request i's reply is reply->element[i], for decode_script_reply().
BatchReply decode_batch_reply(const redisReply *reply, std::size_t requests);

// Decodes one request's reply, for `zones` zones into `out` and `counts`
// (which holds `zones` entries).  Never trusts the reply's shape: a null
// reply, wrong types, wrong lengths and negative numbers are kMalformed.
ScriptReply decode_script_reply(const redisReply *reply, std::size_t zones,
                                ZoneCount *counts);

}  // namespace ratelimit
