// The Redis script that decides a request for all its zones at once, and the
// decoding of its reply.
//
// Call: EVALSHA <sha> <zones> KEY... MODE ARG... with one key per zone, MODE
// "count" (decide and count the request) or "peek" (report, count nothing),
// then kArgsPerZone arguments per zone, in the order of the keys:
//   limit; bucket length in ms; buckets per window; "s" for a sliding
//   window of buckets, "f" for a fixed window (one bucket, the whole
//   window, aligned to Redis time); "1" to enforce the limit, "0" for dry
//   run.
// Reply: an array of integers, 2 + kRepliesPerZone * zones long:
//   Redis time in ms, 1 if the request was rejected, then per zone the count
//   in the window after this request, the oldest non-empty bucket (0 if
//   none), and 1 if this request did not fit in the zone.
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
        kNoScript,   // Redis does not have the script: load it and retry
        kError,      // an error reply; `error` holds its text
        kMalformed,  // not the shape the script answers with
    };

    Kind kind;
    std::uint64_t now_ms;
    bool rejected;
    std::string_view error;  // points into the decoded reply
};

// Decodes a reply to the script for `zones` zones into `out` and `counts`
// (which holds `zones` entries).  Never trusts the reply's shape: a null
// reply, wrong types, wrong lengths and negative numbers are kMalformed.
ScriptReply decode_script_reply(const redisReply *reply, std::size_t zones,
                                ZoneCount *counts);

}  // namespace ratelimit
