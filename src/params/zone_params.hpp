// `ratelimit_zone NAME key=VALUE ...`: the zone's name, key text and
// policy, read from the directive's tokens.  A zone with `concurrency=`
// bounds requests in flight; any other counts their rate.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "calendar/calendar_period.hpp"
#include "limits/policy.hpp"
#include "params/param_values.hpp"
#include "scripts/concurrency_script.hpp"
#include "top/top_summary.hpp"

namespace ratelimit {

// Off unless asked for: the slices' flushes are calls of a script, which
// a zone with the Redis module's command would otherwise never send.
constexpr std::uint32_t kTopDefault = 0;

enum class ZoneKind { kRate, kConcurrency };

struct ZoneParams {
    std::string_view name;
    std::string_view key;            // the `key=` value, not empty; nginx
                                     // compiles its variables
    ZoneKind kind = ZoneKind::kRate;
    Policy policy{};                 // a rate zone's; its limit is 0
                                     // when limit_variable is set
    // `limit=$NAME` or `rate=$NAME`: the value with variables, which nginx
    // compiles and evaluates per request (see limit_from_value()); empty
    // when the limit is a number.
    std::string_view limit_variable;
    bool limit_is_rate = false;      // it came from rate=: a rate
    ConcurrencyPolicy concurrency{}; // a concurrency zone's
    // A rate zone's `lease=SIZE`: bytes of shared memory for its quota
    // leases (leases/lease_ledger.hpp); 0, none: every request asks Redis.
    std::uint64_t lease_bytes = 0;
    // A rate zone's `ban=TIME` in ms (whole seconds): how long a subject
    // its limit refuses is banned (issue 43); 0, none.
    std::uint64_t ban_ms = 0;
    // A rate zone's `top=K`: the counters of its top subjects' summaries
    // (top/top_summary.hpp); 0, `top=off`: none kept.
    std::uint32_t top = kTopDefault;
    // A calendar zone's (`window=day|week|month|year`, its algorithm
    // kCalendar): its period, where the period begins (`start=`), and its
    // time zone's name (`tz=`, valid_zone_name(); empty: UTC), whose file
    // nginx reads.
    PeriodKind period = PeriodKind::kDay;
    PeriodStart period_start{};
    std::string_view tz;
    // What `nginx -t` warns of in the zone (params/zone_warnings.hpp),
    // besides its key, which names variables only nginx knows.
    std::vector<std::string> warnings;
};

// tokens: NAME, then the parameters.  An error on token 0 is the name's.
ParamResult<ZoneParams> parse_zone_params(const ParamTokens &tokens);

}  // namespace ratelimit
