// The counters behind `ratelimit_metrics`, as they lie in shared memory, and
// their arithmetic: histogram buckets, the layout of per-worker rows, and
// the sums a scrape makes of them.  Every counter is a 64-bit word that only
// ever grows by atomic adds, so a scrape reads each one whole without a lock
// while workers write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ratelimit {

// What a zone did with a request it applied to.  A rejection counts in the
// zone that rejected only; the request was counted in none of its zones.
enum class Decision : std::size_t {
    kPassed,
    kRejected,
    kRejectedDryRun,
    kError,          // no verdict, let through (ratelimit_fail open)
    kErrorRejected,  // no verdict, answered 503 (ratelimit_fail closed)
    kInvalid,        // the request's cost or limit was no valid value: 400
    kCount,
};

enum class LinkError : std::size_t {
    kTimeout,     // a request's wait for its verdict ran out
    kConnect,     // a connection attempt failed or timed out
    kClosed,      // an open connection was lost or dropped as wedged
    kErrorReply,  // Redis answered a call or the handshake with an error
    kNoScript,    // Redis did not have the script (restarted, flushed)
    kTopDropped,  // a slice of a zone's top subjects not flushed: Redis
                  // down, an error answered, or its reply lost
    kCount,
};

enum class LinkState : std::uint64_t { kDown, kConnecting, kUp, kCount };

// What `ratelimit_fail local` decided for a rate zone while Redis could not
// be reached.
enum class LocalDecision : std::size_t { kPassed, kRejected, kCount };

// What a concurrency zone did with a request, beside its decisions.
enum class PermitEvent : std::size_t {
    kAdmitted,           // a row at once
    kAdmittedAfterWait,  // a row from the queue
    kQueueFull,          // refused at once
    kWaitTimeout,        // waited queue_timeout in vain
    kGoneWhileQueued,    // the client left while queued
    kCount,
};

// Units of a rate zone: what admitted requests reserved, what rejected ones
// asked for, and what settles Redis answered added or gave back.
enum class UnitEvent : std::size_t {
    kAdmitted,
    kRejected,
    kSettleAdded,
    kSettleReturned,
    kCount,
};

// What became of a settle (`ratelimit_settle`).
enum class SettleOutcome : std::size_t {
    kApplied,  // Redis answered it
    kDropped,  // never sent: the queue while Redis was away was full, the
               // worker exited first, no memory, or a calendar zone's
               // periods it named passed while it waited
    kUnknown,  // sent, never answered (the connection failed): not resent
    kFailed,   // Redis answered an error
    kCount,
};

// A change of a subject's override through the status API's PUT, counted
// by the server that answered it.
enum class OverrideChangeKind : std::size_t {
    kSet,
    kRemoved,
    kCount,
};

std::string_view decision_name(Decision d);
std::string_view unit_event_name(UnitEvent e);
std::string_view settle_outcome_name(SettleOutcome o);
std::string_view override_change_name(OverrideChangeKind c);
std::string_view permit_event_name(PermitEvent e);
std::string_view link_error_name(LinkError e);
std::string_view link_state_name(LinkState s);
std::string_view local_decision_name(LocalDecision d);

// A histogram of `kBounds` upper bounds, stored per bucket (not cumulated:
// one add per observation) with the +Inf bucket last, and the sum of the
// observations in the histogram's stored unit.
template <std::size_t kBounds>
struct Histogram {
    std::uint64_t buckets[kBounds + 1];
    std::uint64_t sum;
};

// Waits and round trips, in microseconds: a verdict from memory takes a few,
// one from Redis on a LAN a few hundred, and past `timeout` (50 ms by
// default) a request stops waiting.
constexpr std::size_t kDurationBounds = 13;
extern const std::uint64_t kDurationBoundsUs[kDurationBounds];
extern const std::string_view kDurationBoundsText[kDurationBounds];  // s

// Requests per script call: a batch holds at most 16.
constexpr std::size_t kBatchBounds = 5;
extern const std::uint64_t kBatchBoundsCount[kBatchBounds];
extern const std::string_view kBatchBoundsText[kBatchBounds];

// The bucket an observation falls in: the first bound not below it, or the
// +Inf bucket (index n) past the last.
std::size_t bucket_index(const std::uint64_t *bounds, std::size_t n,
                         std::uint64_t value);

// Waits in a concurrency zone's queue, in microseconds: a freed row
// reaches the next waiter in about a millisecond, and a waiter gives up
// after queue_timeout (10 s unless configured).
constexpr std::size_t kQueueWaitBounds = 12;
extern const std::uint64_t kQueueWaitBoundsUs[kQueueWaitBounds];
extern const std::string_view kQueueWaitBoundsText[kQueueWaitBounds];  // s

using DurationHistogram = Histogram<kDurationBounds>;
using QueueWaitHistogram = Histogram<kQueueWaitBounds>;
using BatchHistogram = Histogram<kBatchBounds>;

// One zone's counters in one worker's row.
struct ZoneCounters {
    std::uint64_t decisions[static_cast<std::size_t>(Decision::kCount)];
    std::uint64_t deny_cache_hits;
    DurationHistogram check_us;      // preaccess to verdict
    std::uint64_t successes;         // let through, answered below 400
    std::uint64_t response_us;       // their response times, summed
    std::uint64_t busy_us;           // see busy_clock
    // A zone whose limit is a variable: the limit it applied to the last
    // request this worker decided in it, and when (now_us()).  Written,
    // not added to; a scrape takes the latest of the rows.
    std::uint64_t applied_limit;
    std::uint64_t applied_us;
    // Concurrency zones only.  In flight: permits_taken - permits_freed;
    // queued: queue_entered - queue_left.
    std::uint64_t permit_events[static_cast<std::size_t>(PermitEvent::kCount)];
    std::uint64_t permits_taken;
    std::uint64_t permits_freed;
    std::uint64_t queue_entered;
    std::uint64_t queue_left;
    QueueWaitHistogram queue_wait_us;  // of the requests admitted after it
    // Rate zones with costs or settles.
    std::uint64_t units[static_cast<std::size_t>(UnitEvent::kCount)];
    std::uint64_t settles[static_cast<std::size_t>(SettleOutcome::kCount)];
    std::uint64_t override_changes[
        static_cast<std::size_t>(OverrideChangeKind::kCount)];
    // Rate zones with ban= (issue 43): subjects this server's requests got
    // banned, and requests refused by a ban in force (by Redis or from the
    // worker's memory).
    std::uint64_t bans;
    std::uint64_t banned_requests;
    // GCRA zones: requests that waited for their turn, and their waits.
    std::uint64_t delayed;
    QueueWaitHistogram delay_us;
    // Rate zones under `ratelimit_fail local`: decided in this server's
    // memory while Redis could not be reached.
    std::uint64_t local[static_cast<std::size_t>(LocalDecision::kCount)];
};

// The Redis link's counters in one worker's row.  `state` and `waiting`
// are the worker's own gauges, written, not added to.
struct LinkCounters {
    std::uint64_t calls;
    BatchHistogram requests_per_call;
    DurationHistogram round_trip_us;
    std::uint64_t errors[static_cast<std::size_t>(LinkError::kCount)];
    std::uint64_t reconnects;
    std::uint64_t state;    // a LinkState
    std::uint64_t waiting;  // requests waiting for a reply
    // `ratelimit_fail local`: the worker's time with its breaker open, in
    // us: the closed intervals, summed, and the start of the open one
    // (now_us()), 0 while closed.  The worker adds an interval before it
    // clears its start: a scrape between the two writes counts it twice,
    // once.
    std::uint64_t local_us;
    std::uint64_t local_since_us;
};

// The whole shared block: a busy clock word per zone, then one row per
// worker, each on cache lines of its own so that workers never write to a
// line another one writes to.
class MetricsLayout {
public:
    static constexpr std::size_t kCacheLine = 64;

    MetricsLayout(std::size_t zones, std::size_t rows);

    std::size_t zones() const { return zones_; }
    std::size_t rows() const { return rows_; }
    std::size_t size() const;

    std::uint64_t *busy_word(void *block, std::size_t zone) const;
    LinkCounters *link(void *block, std::size_t row) const;
    ZoneCounters *zone(void *block, std::size_t row, std::size_t zone) const;

private:
    std::size_t row_offset(std::size_t row) const;

    std::size_t zones_;
    std::size_t rows_;
    std::size_t row_size_;
};

// Names the block's layout, so that a configuration whose zones, their
// order or the row count differ uses a block of its own: FNV-1a over
// these, the layout's version and `names` in order.
std::uint64_t layout_signature(const std::string_view *names,
                               std::size_t zones, std::size_t rows);

// Server-wide busy time of a zone: the time in which at least one request
// it let through was in flight in some worker.  Each worker keeps its own
// count of such requests and touches the zone's shared word only when that
// count leaves or reaches 0; under load that is rarely.  The word holds
// the mask of busy rows (15 bits; row % 15), a flag set while a closed
// interval is being added to busy_us, and the start of the current
// interval in microseconds, modulo 2^48 (8.9 years): intervals are
// differences modulo the same.
namespace busy_clock {

constexpr unsigned kMaskRows = 15;

constexpr std::uint64_t kStartMask = (std::uint64_t{1} << 48) - 1;
constexpr std::uint64_t kClosing = std::uint64_t{1} << 48;

void enter(std::uint64_t *word, std::size_t row, std::uint64_t now_us);

// Closes the interval if `row` was the last busy one: its length is added
// to *busy_us before the flag is cleared, so that read() never sees it
// neither in the word nor in the sum.
void leave(std::uint64_t *word, std::size_t row, std::uint64_t now_us,
           std::uint64_t *busy_us);

// The busy time of the open interval at `now_us` (0 if none) plus
// `closed_us()`, the sum of the closed ones, read consistently.
template <typename ClosedSum>
std::uint64_t read(const std::uint64_t *word, std::uint64_t now_us,
                   ClosedSum closed_us);

}  // namespace busy_clock

inline std::uint64_t load_counter(const std::uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

// Sums of every row's counters, as a scrape reports them.
void add_zone(const ZoneCounters &row, ZoneCounters *sum);
// A row's local_us at `now_us` (now_us()) is added, its open interval
// included; local_since_us is not summed.
void add_link(const LinkCounters &row, std::uint64_t now_us,
              LinkCounters *sum);

template <typename ClosedSum>
std::uint64_t busy_clock::read(const std::uint64_t *word,
                               std::uint64_t now_us, ClosedSum closed_us)
{
    // A writer holds the flag for two instructions; past this many tries
    // it was descheduled meanwhile, and the sum may lack its interval.
    constexpr int kTries = 1000;
    std::uint64_t closed = 0;

    for (int i = 0; i < kTries; i++) {
        std::uint64_t before = __atomic_load_n(word, __ATOMIC_ACQUIRE);

        if (before & kClosing) {
            continue;
        }

        closed = closed_us();

        if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != before) {
            continue;
        }

        bool open = (before >> 49) != 0;
        return closed + (open ? (now_us - before) & kStartMask : 0);
    }

    return closed;
}

}  // namespace ratelimit
