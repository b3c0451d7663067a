// Configuration of ngx_http_ratelimit_module as nginx holds it: plain structs
// in configuration pools (every member trivially destructible, so the pools
// free them without cleanups), shared by the shell's translation units.
#pragma once

#include "common/ngx_glue.hpp"
#include "scripts/concurrency_script.hpp"
#include "limits/calendar_zone.hpp"
#include "limits/policy.hpp"
#include "scripts/window_script.hpp"

namespace ratelimit {

struct LeaseTable;

// One ADDRESS of `ratelimit_redis`: a Redis server, or a sentinel.
struct RedisAddress {
    ngx_str_t text;         // as written, for log lines
    ngx_addr_t addr;        // resolved when the configuration is read
    ngx_str_t host;         // as written, NUL-terminated, an IPv6 address
                            // without its brackets; empty for unix:
    bool named;             // host is a name, not an IP address
    in_port_t port;
};

// Who the module is to a Redis server: AUTH [user] password, SELECT db.
struct RedisCredentials {
    ngx_str_t user;         // Redis 6 ACL user; empty for none
    ngx_str_t password;     // empty: no AUTH
    ngx_int_t db;           // SELECT unless 0
};

// A file a directive names, and where the directive stands, for errors
// found once the whole http block is read.
struct ConfFile {
    ngx_str_t path;              // full name, NUL-terminated; empty if unset
    ngx_str_t conf_file;
    ngx_uint_t line;
};

// Where a directive stands, for the checks made once the http block is
// read (directives/conf_places.hpp).
struct ConfPlace {
    ngx_str_t directive;         // its name
    ngx_str_t file;
    ngx_uint_t line;
};

// The `ratelimit_redis_ssl*` directives, and what they make.
struct RedisTls {
    ngx_flag_t enable;
    ngx_flag_t verify;
    ngx_int_t verify_depth;
    ngx_flag_t server_name;      // send SNI (a host name, never an IP
                                 // address); unset: if the first address
                                 // is a host name
    ngx_uint_t protocols;
    ngx_str_t ciphers;
    ConfFile trusted_certificate;
    ConfFile certificate;
    ConfFile certificate_key;
    ngx_str_t name;              // checked against every certificate, and
                                 // sent as SNI; NUL-terminated.  Empty:
                                 // each server's own host instead
                                 // (RedisConnection::Peer::host)
#if (NGX_SSL)
    ngx_ssl_t *ssl;              // with `on`: the context every connection
                                 // to Redis and the sentinels uses
#endif
};

// Where `ratelimit_redis` points, and how to talk to it.
struct RedisTarget {
    ngx_array_t addresses;      // of RedisAddress: the server, or sentinels
    ngx_str_t sentinel_master;  // empty: addresses holds the server itself
    bool cluster;               // addresses are seed nodes of a cluster
    bool cross_slot;            // a cluster's calls batched per master
    ngx_str_t tag_key;          // keys a cluster's hash tags; empty: none
    ngx_str_t wake_key;         // signs wake-ups (hex); empty: none
    RedisCredentials data;      // for the Redis server
    RedisCredentials sentinel;  // for the sentinels (db unused)
    ngx_msec_t timeout;         // a request's wait for its verdict
    ngx_msec_t connect_timeout; // each step of a connect: TCP, TLS, asking
                                // a sentinel, checking ROLE
    bool packed;                // new window keys are packed strings, else
                                // hashes (layout=)
    ngx_str_t file;             // where the directive stands
    ngx_uint_t line;

    const RedisAddress &first() const
    {
        return static_cast<const RedisAddress *>(addresses.elts)[0];
    }
};

struct Zone {
    ngx_str_t name;
    ngx_uint_t index;         // its place in MainConf::zones
    ngx_http_complex_value_t key;
    Policy policy;            // its limit is 0 with limit_value
    // `limit=$NAME` or `rate=$NAME`: evaluated for each request, whose
    // limit it gives (limit_from_value()); nullptr for a number.
    ngx_http_complex_value_t *limit_value;
    bool limit_is_rate;       // rate=$NAME: its value is a rate
    // The zone's script arguments that do not depend on the request, made
    // once, encoded: see write_zone_args().  Empty with limit_value, for
    // a GCRA zone and for a calendar zone: a call's are made with its
    // request's limit and burst, and its periods (policy_at()).
    ngx_str_t script_args;
    ngx_str_t policy_member;  // its member of the RateLimit-Policy list;
                              // empty with limit_value, likewise
    // A concurrency zone bounds requests in flight instead (the members
    // above unused); nullptr for a rate zone.
    const ConcurrencyPolicy *concurrency;
    // A GCRA zone: the largest burst a location applies it with, under
    // which the status API (`ratelimit_query`) reports it.
    std::uint64_t largest_burst;
    // Some `ratelimit_settle` may give units back (a reservation larger
    // than what was used, or refunded): a subject's count can fall before
    // its reset, so a rejection is not remembered (the deny cache).
    bool gives_back;
    // `lease=SIZE`: this server's quota leases of the zone's subjects
    // (leases/lease_table.hpp); nullptr: every request asks Redis.
    LeaseTable *leases;
    // `ban=TIME` in ms: how long a subject its limit refuses is banned
    // (issue 43), kept beside its overrides in its side key; 0: none.
    std::uint64_t ban_ms;
    // A rate zone of a configuration with `ratelimit_query ...
    // override=on`, or one with ban=: the base of its subjects' side keys,
    // "PREFIX:ZONE+" (keys/subject_key.hpp), whose overrides and bans its
    // calls read; empty: none.
    ngx_str_t side_base;
    // A calendar zone's periods: its time zone, in the cycle's pool (a
    // cleanup destroys it), and the periods of the clock, which each
    // worker keeps in its own copy of the pool from one call to the next;
    // nullptr for other zones.  `tz` is its name as configured (empty:
    // UTC).
    CalendarPeriods *calendar;
    ngx_str_t tz;
    // A rate zone's `top=K`: the counters of its top subjects' summaries
    // (top/top_summary.hpp); 0: none kept.  Its place in the shared memory
    // of the tops (top/top_memory.hpp), in bytes from the block's start.
    std::uint32_t top;
    std::size_t top_offset;
};

// The zone's policy for a call made at wall_ms (nginx's wall clock, ms
// since 1970): a calendar zone's periods are those of that instant.
inline Policy policy_at(const Zone &zone, std::uint64_t wall_ms)
{
    Policy policy = zone.policy;

    if (zone.calendar != nullptr) {
        zone.calendar->make_call(&policy, wall_ms);
    }

    return policy;
}

// One `ratelimit zone=NAME [dry_run];`, resolved to its zone when the http
// block has been read, so zones may be defined after their first use.
struct ZoneRef {
    ngx_str_t name;
    Zone *zone;
    bool dry_run;
    // What a request costs in the zone, in units: `cost=N` (1 unless
    // given), or `cost=$NAME`'s value for each request (cost_value, then
    // not nullptr).
    std::uint64_t cost;
    ngx_http_complex_value_t *cost_value;
    // A GCRA zone's: `burst=`, and the requests over the rate let through
    // at once, `delay=` (kNoDelay: `nodelay`), as limit_req's: see
    // limits/gcra.hpp.
    std::uint64_t burst;
    std::uint64_t delay;
    bool shaping;     // one of them was given: the zone must be GCRA
    bool query;       // of `ratelimit_query`: reports under largest_burst
    ngx_str_t file;  // where the directive stands, for the error if the
    ngx_uint_t line; // zone is never defined
};

// One `ratelimit_settle zone=NAME VALUE [empty=keep|refund];`: at the log
// phase, VALUE is what the request really cost in the zone.
struct SettleRef {
    ngx_str_t name;
    const Zone *zone;               // bound once the http block is read
    ngx_http_complex_value_t value;
    bool refund_empty;              // empty=refund; else keep
    ngx_str_t file;                 // where the directive stands
    ngx_uint_t line;
};

struct MainConf {
    ngx_array_t zones;     // of Zone *
    RedisTarget *redis;    // nullptr without `ratelimit_redis`
    RedisTls tls;
    // nginx's `resolver` of the http block, if one is configured: host
    // names of Redis are resolved again on each reconnect through it.
    ngx_resolver_t *resolver;
    ngx_msec_t resolver_timeout;
    ngx_str_t prefix;      // Redis key prefix
    ngx_array_t *places;   // of ConfPlace: directives nginx's slots read,
                           // where they stand; nullptr: none yet
    bool used;             // some location applies a zone
    bool concurrency;      // some location applies a concurrency zone
    bool metrics;          // some location has `ratelimit_metrics`
    bool settles;          // some location has `ratelimit_settle`
    // Some `ratelimit_query` has delete=on or override=on: every worker
    // listens for forgiven subjects (rate/forgive_listener.hpp).
    bool forgive;
    // Some `ratelimit_query` has override=on: every rate zone reads its
    // subjects' overrides (Zone::side_base).
    bool overrides;
    ngx_shm_zone_t *metrics_zone;  // its counters, when it has
    // Some location applies a zone with `ratelimit_fail local`.
    bool fail_local;
    // The live servers are learnt and counts kept locally: `fail_local`,
    // or a zone has `lease=` (whose shares need the live servers); the
    // size of the shared memory that counts locally, in bytes
    // (`ratelimit_local_memory`), and that memory once added.
    bool local;
    size_t local_memory;
    ngx_shm_zone_t *local_zone;
    // The rate zones' top subjects' summaries (top/top_memory.hpp);
    // nullptr: no zone keeps them, or no `ratelimit_redis` to flush to.
    ngx_shm_zone_t *top_zone;
};

struct LocConf {
    ngx_array_t *zones;    // of ZoneRef; NGX_CONF_UNSET_PTR to inherit
    ngx_uint_t status;     // answer to a rejected request
    ngx_flag_t grpc;       // a refused gRPC call is answered in gRPC
    ngx_flag_t headers;
    ngx_uint_t fail;       // a FailPolicy
    ngx_uint_t fail_servers;  // kFailLocal's `servers=N`; 0: the live
                              // servers learnt from Redis
    ngx_uint_t fail_status;   // kFailClosed's `status=N`, 400-599; 503
    ngx_flag_t dry_run;
    ngx_uint_t log_level;  // of the line logged for a rejection
    ngx_str_t peek_header; // a request carrying it is only reported on
    ngx_array_t *query;    // of ZoneRef: `ratelimit_query` zones, or null
    bool query_delete;     // its delete=on: DELETE forgives a subject
    bool query_override;   // its override=on: PUT sets a subject's limit
    ngx_array_t *settles;  // of SettleRef; NGX_CONF_UNSET_PTR to inherit
    bool metrics;          // `ratelimit_metrics` answers here
    ngx_str_t dashboard;   // the page `ratelimit_dashboard` serves here
                           // (report/dashboard_page.hpp), or empty
};

// What a request gets when Redis gives no verdict: passed, 503, or decided
// in this server's memory against its share of the limit (rate zones; a
// concurrency zone fails open under kFailLocal).
enum FailPolicy : ngx_uint_t {
    kFailOpen = 0,
    kFailClosed = 1,
    kFailLocal = 2,
};

inline MainConf *main_conf(ngx_http_request_t *r)
{
    return static_cast<MainConf *>(
        ngx_http_get_module_main_conf(r, ngx_http_ratelimit_module));
}

inline LocConf *loc_conf(ngx_http_request_t *r)
{
    return static_cast<LocConf *>(
        ngx_http_get_module_loc_conf(r, ngx_http_ratelimit_module));
}

}  // namespace ratelimit
