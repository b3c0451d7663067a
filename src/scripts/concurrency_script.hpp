// The Redis script behind concurrency zones: a fleet-wide semaphore per
// subject with a first-in first-out queue, and the formatting and decoding
// of its calls.
//
// Each subject has two sorted sets, which share a hash slot (their names
// are the subject's key in braces, then ":held" or ":queue"):
// - held: one member per request holding a permit, scored by the end of its
//   lease (Redis time, ms).  A lease past its end is the permit of a server
//   that died: the next call on the subject frees it.
// - queue: one member per waiting request, scored by its arrival (Redis
//   time, us, made strictly increasing), so that the oldest waiter comes
//   first.  A waiter older than queue_timeout is dropped by the next call.
// Members are tokens "WORKER.SEQ": WORKER names the nginx worker (16 hex
// digits), SEQ its request.  A permit freed is given, in the same call, to
// the oldest waiter, which is moved to `held` before it is told: by a
// PUBLISH of its token on the channel "PREFIX:wake:WORKER", which only its
// own worker subscribes to, so one release wakes one waiter.  Anyone who
// may PUBLISH can forge one.  With a wake key (base/fleet_secret.hpp) the
// script signs it; a waiter goes on at once on a message signed with its
// fleet's key, and takes any other as a hint, checking (kCheck) that it
// holds the permit before it goes on.  The message
// is "TOKEN FREED_US": when the permit was freed, in microseconds since the
// epoch, by the releasing worker's clock (for a release) or by Redis's (for
// a lease that ran out), so that the waiter's worker can time the hand-off;
// signed, "TOKEN FREED_US SIG", SIG: wakeup_signature().
//
// Call: EVALSHA sha 2 HELD QUEUE OP TOKEN LIMIT QUEUE_LIMIT LEASE_MS
// QUEUE_TIMEOUT_MS CHANNEL_PREFIX DRY_RUN FREED_US (0 but for a release)
// WAKE_KEY (40 hex digits, or empty: messages go unsigned).
// Reply: {code, number}; see PermitCode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/sha1.hpp"
#include "replies/reply.hpp"

namespace ratelimit {

struct ConcurrencyPolicy {
    std::uint64_t limit;             // requests in flight per subject, > 0
    std::uint64_t queue;             // more that may wait; 0: none
    std::uint64_t queue_timeout_ms;  // a waiter's longest wait
    std::uint64_t lease_ms;          // a dead server's permits come back
};

enum class PermitOp : char {
    kAcquire = 'a',  // take a permit, or a place in the queue
    kCheck = 'c',    // a waiter asks whether it holds a permit now
    kRenew = 'n',    // a holder extends its lease
    kRelease = 'r',  // give up a permit or a place in the queue
    kStatus = 's',   // report, change nothing but what expired
};

// The first number of the reply.
enum class PermitCode : long long {
    kRefused = -1,   // acquire: the queue is full; check: no longer queued
    kQueued = 0,     // acquire, check: waiting; the number is its place
    kHeld = 1,       // acquire, check: holds a permit; renew, release: done
                     // (a check's number: when Redis gave it the permit,
                     // ms since the epoch, by Redis's clock)
    kWouldWait = 2,  // acquire with dry run: would have waited
};

std::string_view concurrency_script();
std::string_view concurrency_script_sha1();

// The key of a subject's `held` set made from its subject key, for
// send_keyed(): "{KEY}:held".  In a cluster KEY holds its own tag
// (subject_key.hpp), so the permit's tag is "PREFIX:ZONE:{TAG", which the
// subject cannot reach.
std::string held_key(std::string_view subject_key);

// The RESP command of one call (EVALSHA, or EVAL with the script's text).
// `worker_channel` is "PREFIX:wake:", to which the script appends WORKER.
struct PermitCall {
    PermitOp op;
    std::string_view subject_key;
    std::string_view token;
    const ConcurrencyPolicy *policy;
    std::string_view wake_prefix;
    bool dry_run;
    std::uint64_t freed_us;  // a release: when, by the worker's clock
    std::string_view wake_key;  // signs the wake-ups it sends; may be empty
};

std::string format_permit_call(const PermitCall &call, bool eval);

struct PermitReply {
    enum class Kind { kAnswer, kNoScript, kError, kMalformed };

    Kind kind;
    PermitCode code;
    std::uint64_t number;    // queue place, or held count for kStatus
    std::uint64_t queued;    // kStatus only: the queue's length
    std::string_view error;  // points into the reply
};

PermitReply decode_permit_reply(const Reply *reply);

// SIG of a wake-up "TOKEN FREED_US" under `wake_key`, as the script makes
// it: the SHA-1 of KEY ":" MESSAGE ":" KEY, the key at both ends so that
// no one can extend a signed message (SHA-1's length extension), 40 hex
// digits.  Without the key no one can make one.
void wakeup_signature(std::string_view wake_key, std::string_view message,
                      char out[kSha1HexLength]);

}  // namespace ratelimit
