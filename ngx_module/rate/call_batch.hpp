// A worker's script calls, gathered into batches: the requests that one turn
// of the event loop decides go to Redis together, in one call of the window
// script per kMaxRequests of them.  Redis runs the script, reads its clock
// and parses a command once per batch instead of once per request, and
// nginx hands hiredis one preformatted command.  A batch goes at the end of
// its loop turn when its connection is idle.  While calls are in flight on
// it, the next is pipelined behind them if it is worth a call of its own
// (CallBatcher::kMinPipelined requests), else it keeps filling until a
// reply comes back (or it is full); at most kMaxCallsOut calls are in
// flight.  Light load pays one round trip; heavy load fills its calls
// instead of multiplying them; and a cluster's masters, each given a share
// of a turn's requests, still get full calls.
#pragma once

#include <string>

#include "conf/module_conf.hpp"
#include "rate/lease_renewals.hpp"
#include "rate/settle_queue.hpp"
#include "report/metrics_model.hpp"
#include "cluster/cluster_slot.hpp"
#include "scripts/script_batch.hpp"

namespace ratelimit {

struct RequestState;
class CallBatcher;
class RedisLink;

// Where the answers of the requests' calls go: the layer above decodes
// them into each request's verdict.  Called only while the part waits.
struct BatchSink {
    // The reply of part `part` of the request's call, in its batch's from
    // `reply` on, the overrides its batch told of it, and the batch's
    // Redis time.
    void (*take_reply)(RequestState *state, ngx_uint_t part,
                       std::uint64_t now_ms, const Reply *reply,
                       Told told) noexcept;
    // The part's batch got no replies: `why` and `detail` say why, for
    // the log.
    void (*part_failed)(RequestState *state, const char *why,
                        std::string_view detail) noexcept;
};

// A batch being filled, or in flight.  hiredis cannot cancel a callback and
// runs every pending one, with a NULL reply if the connection fails, so the
// record handed to it cannot live in a request's pool: the batcher owns it,
// and a request that stops waiting (timeout, client gone) clears its slot.
struct Batch {
    // Requests per batch.  Sending a full batch at once, before the loop
    // turn ends, lets Redis run it while nginx reads more requests, and
    // bounds how long one call holds Redis (about 64 x 4 us with the
    // script).  While a call is in flight the next batch fills up to this
    // under load: 64 made 0.04 calls per request in the benchmark where 16
    // made 0.07, and cost Redis 10% less CPU per request.
    static constexpr ngx_uint_t kMaxRequests = 64;

    // Each request names its zones by one byte: a batch of requests in
    // many zones is sent when the next would not fit.
    static_assert(kMaxZonesPerRequest <= ScriptBatch::kMaxZoneDescriptors);

    CallBatcher *owner;
    ScriptBatch call;
    RequestState *states[kMaxRequests];  // nullptr: stopped waiting, or
    Settle *settles[kMaxRequests];       // a settle, else nullptr
    LeaseRenewal *renewals[kMaxRequests];  // a renewal, else nullptr
    ngx_uint_t settle_count;             // entries of no request: settles
                                         // and renewals
    std::uint8_t parts[kMaxRequests];    // which part of its request each is
    std::uint32_t group;                 // see CallBatcher::group_of()
    std::uint16_t slot;                  // in a cluster: where it is sent
    ScriptBatch::Form form;              // as last sent; kEval: resent
    std::uint64_t sent_us;               // for the round-trip metric
    int hold;                            // CallBatcher::hold_index()
    bool counted;                        // in calls_out_[hold]
    bool due;  // open while a call of its connection was answered
    Batch *next_free;
};

// The script arguments of the request's zone i (write_zone_args()) in a
// call made at wall_ms (nginx's wall clock): the zone's own, or made in
// `out` under the request's limit for a zone whose limit is a variable,
// a GCRA zone's under its burst, a calendar zone's in the periods of
// wall_ms (call_policy_of()).
std::string_view request_zone_args(const RequestState *state, ngx_uint_t i,
                                   std::uint64_t wall_ms,
                                   char (&out)[kZoneArgsMaxSize]) noexcept;

// An error the window script's call answered, whole or for one request,
// told to the link where it says something of the link: READONLY (a
// replica now), or, with cross_slot, a key refused inside the script as
// not local, with no MOVED for the cluster to follow: the slot map may
// have changed under us.
void tell_link_of_script_error(RedisLink *link,
                               std::string_view error) noexcept;

class CallBatcher {
public:
    // `target`: `ratelimit_redis`, whose calls go per master of a cluster
    // with `cross_slot` (else per slot), ask for its layout of new keys,
    // and whose timeout an exiting worker waits for its settles.
    CallBatcher(RedisLink *link, const RedisTarget &target,
                const BatchSink &sink, ngx_log_t *log) noexcept;
    ~CallBatcher();

    CallBatcher(const CallBatcher &) = delete;
    CallBatcher &operator=(const CallBatcher &) = delete;

    enum class QueueResult { kQueued, kDown, kSaturated, kNoMemory };

    // Adds the call of a waiting request (state->keys, refs, peek,
    // interval_buckets) to the open batch, or in a cluster to the open
    // batch of each slot its keys are in, one part of the request each.
    // Unless kQueued, nothing was added: the link is down, kMaxInFlight
    // requests already wait for Redis, or no memory.
    QueueResult queue(RequestState *state) noexcept;

    // Requests a worker keeps waiting for Redis at most.  A stalled Redis
    // leaves every batch queued (its bytes, its callback) even after its
    // requests timed out; this bounds that memory (about 1 KB for a request
    // alone in its batch, its share of a few KB in a full one) and makes
    // requests past it fail at once instead of waiting.
    static constexpr ngx_uint_t kMaxInFlight = 65536;

    // Batches open at once in a loop turn, one per cluster slot its
    // requests' keys are in: past it, all are sent.
    static constexpr ngx_uint_t kMaxOpen = 64;

    // Masters (by index) whose calls are held back while one is in flight,
    // with cross_slot.
    static constexpr ngx_uint_t kMaxHeld = 256;

    // Calls in flight on one connection at most: past it, the next batch
    // fills until a reply comes back.
    static constexpr std::uint16_t kMaxCallsOut = 4;

    // Requests a batch needs to be pipelined behind a call in flight.  A
    // call costs Redis some 4 to 5 decisions' worth on its own (parsing,
    // the script's set-up and TIME, the reply's write): from 8 requests on
    // that is at most about half a decision each.  A smaller batch waits
    // for a reply of its connection, at most one round trip.
    static constexpr ngx_uint_t kMinPipelined = 8;

    // Answered batches kept for reuse, with their buffers; after a stall
    // the rest are freed.
    static constexpr ngx_uint_t kMaxFree = 64;

    // The request stops waiting: its reply, when it comes, goes nowhere.
    static void forget(RequestState *state) noexcept;

    // Sends `units` to bucket `bucket` of `key` in `zone`, its call
    // written with `policy` (a calendar zone's in the periods of nginx's
    // clock as it is sent), in the next batch of the key's connection, or
    // once the link is up again (SettleQueue), unless the periods a
    // calendar zone's call would name by then leave out the bucket's.
    // Never resent once it may have reached Redis.  Whatever becomes of it
    // is counted in the metrics, and logged unless Redis answered it; it
    // never fails the caller.
    void settle(std::string_view key, const Policy &policy,
                std::int64_t units, std::uint64_t bucket,
                const Zone &zone) noexcept;

    // Asks Redis to count up to `asked` units of `key` in `zone` for a
    // lease (rate/lease_renewals.hpp), in the next batch of the key's
    // connection, with `zone_args` made at made_ms (nginx's wall clock);
    // `renewed` is told the outcome, at once if the link is down.
    void renew_lease(std::string_view key, std::string_view zone_args,
                     std::uint64_t made_ms, std::uint64_t asked,
                     const Zone &zone, LeaseRenewed renewed) noexcept;

private:
    // The reply to a batch, or nullptr when the connection failed with it
    // in flight.
    void on_reply(Batch *batch, const Reply *reply) noexcept;
    static bool waited(void *batch) noexcept;
    std::uint32_t group_of(std::uint16_t slot) const noexcept;
    Batch *open_for(std::uint32_t group, std::uint16_t slot) noexcept;
    bool add_part(RequestState *state, ngx_uint_t part) noexcept;
    bool fill(Batch *batch, RequestState *state, ngx_uint_t part) noexcept;
    ZoneSide side_of(const Zone &zone, std::uint16_t slot,
                     char (&tag)[kSlotTagMaxSize]) const noexcept;
    bool compact(Batch *batch) noexcept;
    int hold_index(std::uint32_t group) const noexcept;
    bool held(const Batch *batch) const noexcept;
    static void on_batch_reply(void *data, const Reply *reply) noexcept;
    // Each new connection loads the script, so that the first calls on it
    // need not send it.  An error answering that setup (`command`) is
    // logged, and the connection made anew.
    static void on_link_up(void *data) noexcept;
    static void on_ping_reply(void *data, const Reply *reply) noexcept;
    static void on_script_loaded(void *data, const Reply *reply) noexcept;
    void refused(const char *command, const Reply *reply) noexcept;

    void send_open(ngx_uint_t i) noexcept;
    void send_batch(Batch *batch) noexcept;
    void send_all() noexcept;
    void send_ready() noexcept;
    const char *send(Batch *batch, ScriptBatch::Form form) noexcept;
    bool resend_as_script(Batch *batch) noexcept;
    // What a batch's failure means for its settles: it never reached
    // Redis (they wait for the link), it did and its outcome is unknown,
    // or Redis refused the whole call before running it (LOADING after a
    // restart, BUSY): they wait for the link too, up to kMaxRefusals
    // times, and fail after that.  A renewal fails whatever the fate.
    enum class SettleFate { kRequeue, kUnknown, kRefused };
    static constexpr std::uint8_t kMaxRefusals = 10;

    void fail_all(Batch *batch, const char *why, std::string_view detail,
                  SettleFate fate) noexcept;
    void release(Batch *batch) noexcept;
    static void on_turn_end(ngx_event_t *ev) noexcept;

    // The calls of no request: settles and renewals
    // (call_batch_settles.cpp).
    template <typename Call>
    bool add_call(Call *call) noexcept;
    bool fill_call(Batch *batch, Settle *settle) noexcept;
    bool fill_call(Batch *batch, LeaseRenewal *renewal) noexcept;
    void fail_renewal(LeaseRenewal *renewal) noexcept;
    void send_waiting_settles() noexcept;
    static void send_held(void *data, bool exiting) noexcept;

    RedisLink *link_;
    bool cross_slot_;
    bool packed_;               // the layout the calls ask for new keys
    BatchSink sink_;
    Batch *open_[kMaxOpen];     // being filled during this loop turn
    ngx_uint_t open_count_ = 0;
    Batch *free_ = nullptr;
    ngx_uint_t free_count_ = 0;
    ngx_uint_t in_flight_ = 0;  // requests queued and not yet answered
    // Calls in flight per hold_index(): see held().
    std::uint16_t calls_out_[kMaxHeld] = {};
    std::string command_;       // the batch being sent, for hiredis to copy
    ngx_event_t turn_end_;      // posted while a batch is open
    SettleQueue settles_;       // the settles and renewals held
};

}  // namespace ratelimit
