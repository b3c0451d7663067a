// The counters `ratelimit_metrics` reports: a shared memory zone of
// per-worker rows (see metrics_model.hpp), and the calls that record into
// the calling worker's row.  Nothing is recorded, and each call costs a
// test of one pointer, unless some location has `ratelimit_metrics`.
//
// The link's calls are one line each at the place where the event happens,
// so that they can follow that place when the connection code changes.
#pragma once

#include "report/metrics_model.hpp"
#include "conf/module_conf.hpp"

namespace ratelimit {

// The shared zone's data: its layout, and the block of counters in it.
struct MetricsShared {
    MetricsLayout layout;
    void *block;
};

namespace metrics {

// After the http block is read (every zone known): adds the shared zone,
// named after the zone set, if a location has `ratelimit_metrics`.
ngx_int_t add_shared_zone(ngx_conf_t *cf, MainConf *mcf) noexcept;

// This worker's row, from init_process to exit_process.
ngx_int_t start_worker(ngx_cycle_t *cycle, MainConf *mcf) noexcept;
void stop_worker() noexcept;

// Something is recorded: some location has `ratelimit_metrics`.
bool enabled() noexcept;

// Monotonic time, the same clock in every process, in microseconds.
std::uint64_t now_us() noexcept;

// now_us() when enabled(), else 0: when a request's check starts.
std::uint64_t check_clock() noexcept;

// Zones are named by their index (Zone::index).  A check came to
// `decision` in the zone after `wait_us`; true if the zone now counts the
// request in flight, until record_zone_done() at `now` (now_us()) for a
// request whose check started at `start_us` (check_clock()).  A request
// ends a success when answered below 400.  A request's zones share one
// reading of the clock.
bool record_zone_decision(ngx_uint_t zone, Decision decision,
                          std::uint64_t wait_us) noexcept;
void record_zone_done(ngx_uint_t zone, bool success, std::uint64_t start_us,
                      std::uint64_t now) noexcept;
void record_deny_cache_hit(ngx_uint_t zone) noexcept;
// Units of a rate zone (see UnitEvent), and a settle's outcome.
void record_units(ngx_uint_t zone, UnitEvent event,
                  std::uint64_t units) noexcept;
void record_settle(ngx_uint_t zone, SettleOutcome outcome) noexcept;
void record_override_change(ngx_uint_t zone,
                            OverrideChangeKind change) noexcept;
// A request got its subject banned in a zone with ban=; a request was
// refused by a ban in force in a zone.
void record_ban(ngx_uint_t zone) noexcept;
void record_banned_request(ngx_uint_t zone) noexcept;
// A GCRA zone made a request it admitted wait `wait_ms` for its turn.
void record_zone_delay(ngx_uint_t zone, std::uint64_t wait_ms) noexcept;
// A zone whose limit is a variable applied `limit` to a request at `now`
// (now_us()).
void record_zone_limit(ngx_uint_t zone, std::uint64_t limit,
                       std::uint64_t now) noexcept;

// `ratelimit_fail local`: a rate zone's decision made in this server's
// memory, and the worker's breaker opening (true) or closing (false): its
// time open is counted.
void record_local_decision(ngx_uint_t zone, LocalDecision decision) noexcept;
void record_local_state(bool open) noexcept;

// Concurrency zones: what a request's ask for a row came to (`event`
// kCount if none of the events; `queue_ms` counts if it was admitted after
// waiting), its entering or leaving the queue, and the end of a request
// that held a row (its success and response time counted then, as
// record_zone_done() counts them for rate zones).
void record_permit_outcome(ngx_uint_t zone, Decision decision,
                           PermitEvent event, std::uint64_t start_us,
                           ngx_msec_t queue_ms) noexcept;
void record_permit_queued(ngx_uint_t zone, bool entering) noexcept;
void record_permit_event(ngx_uint_t zone, PermitEvent event) noexcept;
void record_permit_freed(ngx_uint_t zone, bool success,
                         std::uint64_t start_us) noexcept;

// The Redis link.  call_sent and call_answered pair in the order Redis
// answers, which is the order calls are sent: round trips are timed by it.
// A call of `requests` requests went out: its send time, in us, for
// record_call_answered() (0 when nothing is recorded).  Calls to several
// cluster nodes, or resent after a redirect, are answered in any order.
std::uint64_t record_call_sent(ngx_uint_t requests) noexcept;
void record_call_answered(bool replied, std::uint64_t sent_us) noexcept;
void record_link_error(LinkError kind) noexcept;
void record_reconnect() noexcept;
void record_link_state(LinkState state) noexcept;
void record_requests_waiting(ngx_uint_t requests) noexcept;

}  // namespace metrics

}  // namespace ratelimit
