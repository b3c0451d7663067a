// Configuration of ngx_http_ratelimit_module as nginx holds it: plain structs
// in configuration pools (every member trivially destructible, so the pools
// free them without cleanups), shared by the shell's translation units.
#pragma once

extern "C" {
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>
}

#include "policy.hpp"
#include "window_script.hpp"

extern "C" ngx_module_t ngx_http_ratelimit_module;

namespace ratelimit {

class CallBatcher;
class DenyCache;
class RedisLink;

// Where `ratelimit_redis` points, and how to talk to it.
struct RedisTarget {
    ngx_str_t display;      // the address as written, for log lines
    ngx_str_t host;         // numeric address, NUL-terminated; empty for unix
    int port;
    ngx_str_t unix_path;    // NUL-terminated; empty for TCP
    ngx_int_t db;           // SELECT unless 0
    ngx_str_t user;         // AUTH user password when set (Redis 6 ACL)
    ngx_str_t password;     // AUTH password when set
    ngx_msec_t timeout;     // a request's wait for its verdict
    ngx_msec_t connect_timeout;
};

struct Zone {
    ngx_str_t name;
    ngx_http_complex_value_t key;
    Policy policy;
    bool fixed;               // algorithm=fixed: one bucket, the window
    // The zone's script arguments that do not depend on the request, made
    // once, encoded: see write_zone_args().
    ngx_str_t script_args;
    ngx_str_t policy_member;  // its member of the RateLimit-Policy list
};

// One `ratelimit zone=NAME [dry_run];`, resolved to its zone when the http
// block has been read, so zones may be defined after their first use.
struct ZoneRef {
    ngx_str_t name;
    Zone *zone;
    bool dry_run;
    ngx_str_t file;  // where the directive stands, for the error if the
    ngx_uint_t line; // zone is never defined
};

struct MainConf {
    ngx_array_t zones;     // of Zone *
    RedisTarget *redis;    // nullptr without `ratelimit_redis`
    ngx_str_t prefix;      // Redis key prefix
    bool used;             // some location applies a zone
    RedisLink *link;       // this worker's connection, from init_process
    CallBatcher *calls;    // its script calls, likewise
    DenyCache *denied;     // this worker's rejected subjects, likewise
};

struct LocConf {
    ngx_array_t *zones;    // of ZoneRef; NGX_CONF_UNSET_PTR to inherit
    ngx_uint_t status;     // answer to a rejected request
    ngx_flag_t headers;
    ngx_uint_t fail;       // kFailOpen or kFailClosed
    ngx_flag_t dry_run;
    ngx_uint_t log_level;  // of the line logged for a rejection
    ngx_str_t peek_header; // a request carrying it is only reported on
    ngx_array_t *query;    // of ZoneRef: `ratelimit_query` zones, or null
};

enum FailPolicy : ngx_uint_t { kFailOpen = 0, kFailClosed = 1 };

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

inline std::string_view view(const ngx_str_t &s)
{
    return {reinterpret_cast<const char *>(s.data), s.len};
}

}  // namespace ratelimit
