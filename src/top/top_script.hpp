// The fleet's top subjects in Redis.  Each server's summaries of a zone's
// finished time slice (kTopSliceS seconds, aligned on Unix time) are added
// by one call, the flush, to three keys of the slice, which share a
// Cluster hash tag ("{PREFIX:ZONE!top}"; zone names hold no '!' nor '{'):
// - BASE:SLICE:q, a sorted set: each subject's requests counted;
// - BASE:SLICE:j, a sorted set: each subject's rejections counted;
// - BASE:SLICE:t, a hash: the slice's exact totals `requests` and
//   `rejected`, the summed errors `error_q` and `error_j` of the servers'
//   summaries (top_summary.hpp), and `servers`, the flushes added.
// BASE is "PREFIX:ZONE!top", in braces in a Cluster; SLICE its start,
// Unix seconds.  Each key lives kTopKeepMs from its last flush.
//
// The read sums the kTopSlices slices before the given end per subject:
// a subject's sum is within the sum of the errors of its true count over
// them (each server's slice counts it within its summary's error).
//
// Flush: EVALSHA sha 3 Q J T TTL_MS REQUESTS REJECTED ERROR_Q ERROR_J NQ
//        (KEY COUNT)*NQ (KEY COUNT)*;  reply: 1.
// Read:  EVALSHA sha 3*kTopSlices (Q J T)* N;  reply: {requests, rejected,
//        error_q, error_j, {KEY REQUESTS REJECTED}* by rejections,
//        {KEY REQUESTS REJECTED}* by requests}, each list at most N long,
//        the most first, ties in the order of the keys' bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "replies/reply.hpp"

namespace ratelimit {

// 2 s slices: a request is in the answer within 4 s (its slice's end,
// then kFlushedAfterS, top_handler.cpp), a minute of 30 slices.
constexpr std::uint64_t kTopSliceS = 2;
constexpr std::uint64_t kTopSlices = 30;
constexpr std::uint64_t kTopWindowS = kTopSliceS * kTopSlices;
// A slice is read for a minute after it ends; its keys outlive that a
// little, so a late flush of it still has them.
constexpr std::uint64_t kTopKeepMs = (kTopWindowS + 2 * kTopSliceS) * 1000;
constexpr std::uint64_t kTopMaxRead = 100;

// "PREFIX:ZONE!top", or "{PREFIX:ZONE!top}" in a Cluster: the slot of the
// base is its calls' (send it as their key).
std::string top_base(std::string_view prefix, std::string_view zone,
                     bool cluster);

struct TopPair {
    std::string_view key;    // a stored form (top_key.hpp)
    std::uint64_t count;
};

// One server's finished slice of a zone.
struct TopFlush {
    std::string base;
    std::uint64_t slice;              // its start, Unix seconds
    std::uint64_t requests, rejected; // its exact totals
    std::uint64_t error_q, error_j;   // its summaries' errors
    std::vector<std::string> keys;    // the summaries' stored forms
    std::vector<std::uint64_t> counts;
    std::size_t by_requests;          // keys[0..by_requests) rank requests,
                                      // the rest rejections
};

// The RESP command of a flush: EVALSHA, or EVAL with the script's text.
// Throws std::bad_alloc.
std::string top_flush_call(const TopFlush &flush, bool eval);

// The RESP command of a read of the top `n` over the kTopSlices slices that
// end at `end` (Unix seconds, a slice's start).  Throws std::bad_alloc.
std::string top_read_call(std::string_view base, std::uint64_t end,
                          std::uint64_t n, bool eval);

struct TopSubject {
    std::string key;
    std::uint64_t requests;
    std::uint64_t rejected;
};

struct TopAnswer {
    std::uint64_t requests = 0, rejected = 0;
    std::uint64_t error_q = 0, error_j = 0;
    std::vector<TopSubject> by_rejected, by_requests;
};

enum class TopReplyKind { kAnswer, kNoScript, kError };

// A read's reply decoded into `answer`.  Throws std::bad_alloc.
TopReplyKind decode_top_read(const Reply &reply, TopAnswer *answer);

// NOSCRIPT: the script did not run (nor did any of it), so the call may
// be sent again with EVAL.
bool top_no_script(const Reply &reply);

}  // namespace ratelimit
