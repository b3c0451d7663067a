#include "params/zone_params.hpp"

#include <iterator>

#include "calendar/time_zone.hpp"
#include "limits/algorithms.hpp"
#include "limits/calendar_zone.hpp"
#include "limits/window_rules.hpp"
#include "params/zone_warnings.hpp"

namespace ratelimit {

namespace {

// The forms of ratelimit_zone, as masks of NamedParam::forms.
constexpr unsigned kRateForm = 1;
constexpr unsigned kConcurrencyForm = 2;

// Unless configured: a waiter gives up after 10 s, and the slots of a
// server that died come back within 10 s.
constexpr std::uint64_t kDefaultQueueTimeoutMs = 10000;
constexpr std::uint64_t kDefaultLeaseMs = 10000;

// A lease is renewed every third of it: shorter ones would renew too often
// to be worth having.
constexpr std::uint64_t kMinLeaseMs = 300;

// The longest lease and queue_timeout: a day.  Both become nginx timers
// and Redis expiry times, which much larger values would overflow; a
// longer wait in a queue, or a dead server's slot kept a day, is no limit
// anyone means.  A request may hold its slot longer: its lease is renewed.
constexpr std::uint64_t kMaxPermitTimeMs = 24 * 3600 * 1000;

// A ban's length: whole seconds (Retry-After and the log say seconds), at
// most a year, longer than any ban meant to end, far below what Redis's
// expiry times and the script's numbers hold (2^53 ms).
constexpr std::uint64_t kMaxBanMs = std::uint64_t{365} * 24 * 3600 * 1000;

// Indexes of kZoneParams.
enum ZoneParam {
    kKey,
    kRate,
    kLimit,
    kWindow,
    kBucket,
    kAlgorithm,
    kConcurrency,
    kQueue,
    kQueueTimeout,
    kLease,
    kTz,
    kStart,
    kBan,
    kTop,
    kZoneParamCount
};

// Their values are checked once all are read, so that a parameter the zone
// does not take is reported before a value it does not accept.
constexpr NamedParam kZoneParams[] = {
    {"key", kRateForm | kConcurrencyForm, nullptr},
    {"rate", kRateForm, nullptr},
    {"limit", kRateForm, nullptr},
    {"window", kRateForm, nullptr},
    {"bucket", kRateForm, nullptr},
    {"algorithm", kRateForm, nullptr},
    {"concurrency", kConcurrencyForm, nullptr},
    {"queue", kConcurrencyForm, nullptr},
    {"queue_timeout", kConcurrencyForm, nullptr},
    // A concurrency zone's slot lease (a time); a rate zone's quota
    // leases' shared memory (a size).
    {"lease", kRateForm | kConcurrencyForm, nullptr},
    // A calendar window's time zone and the start of its periods.
    {"tz", kRateForm, nullptr},
    {"start", kRateForm, nullptr},
    // How long a subject the zone's limit refuses is banned (issue 43).
    {"ban", kRateForm, nullptr},
    // The counters of the zone's top subjects (issue 45), or off.
    {"top", kRateForm, nullptr},
};

static_assert(std::size(kZoneParams) == kZoneParamCount);

using ZoneValues = std::optional<std::string_view>[kZoneParamCount];

// Zone names go into Redis keys and quoted header members: tokens only, and
// never '#', which marks hashed subjects in keys, nor '+', which marks side
// keys (keys/subject_key.hpp).
bool valid_name(std::string_view name)
{
    if (name.empty()) {
        return false;
    }

    for (char c : name) {
        bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')
                     || (c >= 'A' && c <= 'Z');

        if (!(alnum || c == '_' || c == '-' || c == '.')) {
            return false;
        }
    }

    return true;
}

// `limit=` or `rate=` takes a variable: a value that starts with "$",
// which nginx compiles (and refuses, if it holds no variable name).
bool is_variable(std::string_view value)
{
    return !value.empty() && value[0] == '$';
}

// A calendar window's algorithm, start and time zone: the algorithm is
// the calendar's, which algorithm=fixed names too (a period is a fixed
// window); a sliding window or GCRA has no calendar periods.
std::optional<std::string> read_calendar(const ZoneValues &v,
                                         ZoneParams *zone)
{
    std::string_view window = *v[kWindow];
    std::string_view algorithm = v[kAlgorithm].value_or("fixed");
    const AlgorithmRow *row = algorithm_named(algorithm);

    if (row != nullptr && row->algorithm != Algorithm::kFixed
        && row->algorithm != Algorithm::kCalendar)
    {
        return "window=" + std::string(window) + " counts calendar periods, "
               "a fixed window: algorithm " + quoted(algorithm)
               + " cannot; leave out \"algorithm=\" or give \"fixed\"";
    }

    if (v[kStart]) {
        auto error = parse_period_start(zone->period, *v[kStart],
                                        &zone->period_start);
        if (error) {
            return error;
        }
    }

    zone->tz = v[kTz].value_or("");

    if (v[kTz] && !valid_zone_name(zone->tz)) {
        return "invalid tz " + quoted(zone->tz) + ": use a time zone of the "
               "tz database, such as Europe/Berlin or UTC";
    }

    zone->policy.algorithm = Algorithm::kCalendar;
    zone->policy.window_ms = nominal_period_ms(zone->period);
    return std::nullopt;
}

// `window=day|week|month|year`: a calendar zone, whose limit is a count
// (a rate has no calendar); else `tz=` and `start=` have no meaning.
std::optional<std::string> read_period(std::string_view name,
                                       const ZoneValues &v, ZoneParams *zone)
{
    auto period = parse_period_kind(v[kWindow].value_or(""));

    if (!period) {
        for (int p : {kTz, kStart}) {
            if (v[p]) {
                return "\"" + std::string(kZoneParams[p].name)
                       + "=\" applies to calendar windows only: "
                         "window=day, week, month or year";
            }
        }
        return std::nullopt;
    }

    if (v[kRate]) {
        return "window=" + std::string(*v[kWindow]) + " takes limit=N or "
               "limit=$NAME, not \"rate=\": a calendar period has no rate";
    }

    if (!v[kLimit]) {
        return "ratelimit_zone " + quoted(name) + " needs \"limit=\" with "
               "window=" + std::string(*v[kWindow]);
    }

    zone->period = *period;
    return read_calendar(v, zone);
}

// The limit of `limit=`: a number, or a variable.
std::optional<std::string> read_limit(std::string_view limit,
                                      ZoneParams *zone)
{
    if (is_variable(limit)) {
        zone->limit_variable = limit;
        return std::nullopt;
    }

    auto parsed = parse_count(limit);

    if (!parsed) {
        return "invalid limit " + quoted(limit);
    }

    zone->policy.limit = *parsed;
    return std::nullopt;
}

// The limit and the window, from `rate=`, or from `limit=` and `window=`.
// A limit from a variable has its window from `window=`, `rate=$NAME` too:
// the window is the zone's, fixed when the configuration is read.
std::optional<std::string> read_rate_window(std::string_view name,
                                            const ZoneValues &v,
                                            ZoneParams *zone)
{
    Policy *policy = &zone->policy;
    bool variable_rate = v[kRate] && is_variable(*v[kRate]);

    if (auto error = read_period(name, v, zone)) {
        return error;
    }

    if (policy->algorithm == Algorithm::kCalendar) {
        return read_limit(*v[kLimit], zone);
    }

    if (v[kRate] && !variable_rate) {
        if (v[kLimit] || v[kWindow]) {
            return "\"rate=\" cannot be combined with \"limit=\" or "
                   "\"window=\"";
        }

        auto rate = parse_rate(*v[kRate]);

        if (!rate) {
            return "invalid rate " + quoted(*v[kRate])
                   + ": use Nr/s, Nr/m, Nr/h or Nr/d with N > 0";
        }

        policy->limit = rate->limit;
        policy->window_ms = rate->window_ms;
        return std::nullopt;
    }

    if (variable_rate) {
        if (v[kLimit]) {
            return "\"rate=\" cannot be combined with \"limit=\"";
        }

        if (!v[kWindow]) {
            return "ratelimit_zone " + quoted(name) + " needs \"window=\" "
                   "with a variable in \"rate=\"";
        }

        zone->limit_variable = *v[kRate];
        zone->limit_is_rate = true;

    } else if (!v[kLimit] || !v[kWindow]) {
        return "ratelimit_zone " + quoted(name)
               + " needs \"rate=\", or both \"limit=\" and \"window=\"";

    } else if (auto error = read_limit(*v[kLimit], zone)) {
        return error;
    }

    auto window_ms = parse_time_ms(*v[kWindow]);

    if (!window_ms) {
        return "invalid window " + quoted(*v[kWindow]);
    }

    if (*window_ms > window_rules::kMaxWindowMs) {
        constexpr std::uint64_t kWeekMs = 7 * 24 * 60 * 60 * 1000;
        return "invalid window " + quoted(*v[kWindow]) + ": at most "
               + std::to_string(window_rules::kMaxWindowMs / kWeekMs) + "w";
    }

    policy->window_ms = *window_ms;
    return std::nullopt;
}

// The names of the algorithms, as choices: "a", "b" or "c".
std::string algorithm_choices()
{
    std::string choices;

    for (std::size_t i = 0; i < kAlgorithmCount; i++) {
        choices += i == 0 ? "" : i + 1 < kAlgorithmCount ? ", " : " or ";
        choices += quoted(kAlgorithms[i].name);
    }

    return choices;
}

// The algorithm, and the buckets the window is cut into.
std::optional<std::string> read_buckets(const ZoneValues &v, ZoneParams *out)
{
    Policy &policy = out->policy;
    bool calendar = policy.algorithm == Algorithm::kCalendar;
    // Without algorithm=, Policy's own: sliding, or a calendar window's.
    std::string_view name = v[kAlgorithm].value_or(row_of(policy).name);
    const AlgorithmRow *row = algorithm_named(name);

    if (row == nullptr) {
        return "invalid algorithm " + quoted(name) + ": use "
               + algorithm_choices();
    }

    if (calendar) {
        // algorithm=fixed names it too (read_calendar()).
        row = &row_of(policy);
    } else if (row->algorithm == Algorithm::kCalendar) {
        return "algorithm \"calendar\" needs window=day, week, month or "
               "year";
    }

    policy.algorithm = row->algorithm;

    if (!row->accepts_bucket) {
        if (v[kBucket]) {
            return "\"bucket=\" applies to sliding windows only";
        }

        // One bucket as long as the window: its number is the window's.
        policy.bucket_ms = policy.window_ms;
        return std::nullopt;
    }

    if (!v[kBucket]) {
        policy.bucket_ms = default_bucket_ms(policy.window_ms);
        return std::nullopt;
    }

    auto bucket_ms = parse_time_ms(*v[kBucket]);

    if (!bucket_ms) {
        return "invalid bucket " + quoted(*v[kBucket]);
    }

    if (*bucket_ms > policy.window_ms || policy.window_ms % *bucket_ms != 0) {
        return "bucket " + quoted(*v[kBucket])
               + " does not divide the window of "
               + std::to_string(policy.window_ms) + " ms into whole buckets";
    }

    policy.bucket_ms = *bucket_ms;
    return std::nullopt;
}

// A queue of 0 is no queue: unlike the count of slots, it may be 0.
std::optional<std::uint64_t> parse_queue_length(std::string_view text)
{
    return text == "0" ? std::optional<std::uint64_t>(0) : parse_count(text);
}

std::optional<std::string> read_concurrency(const ZoneValues &v,
                                            ConcurrencyPolicy *policy)
{
    auto limit = parse_count(v[kConcurrency].value_or(""));

    if (!limit) {
        return "invalid concurrency " + quoted(v[kConcurrency].value_or(""));
    }

    auto queue = v[kQueue] ? parse_queue_length(*v[kQueue])
                           : std::optional<std::uint64_t>(0);

    if (!queue) {
        return "invalid queue " + quoted(*v[kQueue]);
    }

    auto timeout_ms = v[kQueueTimeout] ? parse_time_ms(*v[kQueueTimeout])
                                       : kDefaultQueueTimeoutMs;

    if (!timeout_ms) {
        return "invalid queue_timeout " + quoted(*v[kQueueTimeout]);
    }

    if (*timeout_ms > kMaxPermitTimeMs) {
        return "invalid queue_timeout " + quoted(*v[kQueueTimeout])
               + ": at most 24h";
    }

    auto lease_ms = v[kLease] ? parse_time_ms(*v[kLease]) : kDefaultLeaseMs;

    if (!lease_ms || *lease_ms < kMinLeaseMs || *lease_ms > kMaxPermitTimeMs) {
        return "invalid lease " + quoted(*v[kLease]) + ": at least "
               + std::to_string(kMinLeaseMs) + " ms, at most 24h";
    }

    *policy = ConcurrencyPolicy{*limit, *queue, *timeout_ms, *lease_ms};
    return std::nullopt;
}

// The smallest shared memory for a rate zone's leases: a few pages of the
// slab allocator, room for some hundreds of subjects.
constexpr std::uint64_t kMinLeaseBytes = 32 * 1024;

// A rate zone's `lease=SIZE` (as limit_req_zone's zone=name:SIZE: N, Nk or
// Nm): the shared memory of its quota leases; none, exact mode.
std::optional<std::string> read_lease_size(const ZoneValues &v,
                                           ZoneParams *out)
{
    if (!v[kLease]) {
        return std::nullopt;
    }

    if (!row_of(out->policy).accepts_leases) {
        return "\"lease=\" applies to sliding and fixed windows only";
    }

    std::string_view text = *v[kLease];
    std::uint64_t scale = 1;

    if (!text.empty() && (text.back() == 'k' || text.back() == 'K')) {
        scale = 1024;
    } else if (!text.empty() && (text.back() == 'm' || text.back() == 'M')) {
        scale = 1024 * 1024;
    }

    auto number = parse_count(scale == 1 ? text
                                         : text.substr(0, text.size() - 1));

    if (!number || *number > (std::uint64_t{1} << 40) / scale
        || *number * scale < kMinLeaseBytes)
    {
        return "invalid lease " + quoted(text)
               + ": a rate zone's lease= is the shared memory of its quota "
                 "leases, at least 32k, such as 1m";
    }

    out->lease_bytes = *number * scale;
    return std::nullopt;
}

// A rate zone's `ban=TIME` (1s to 365d, whole seconds): a subject whose
// request the zone's limit refuses is refused for that long.  Not with
// lease=: a lease admits without asking Redis, so a ban set by one server
// would not stop the requests other servers admit from their leases.
std::optional<std::string> read_ban(const ZoneValues &v, ZoneParams *out)
{
    if (!v[kBan]) {
        return std::nullopt;
    }

    if (v[kLease]) {
        return "\"ban=\" cannot go with \"lease=\": a lease admits requests "
               "without asking Redis, so a ban would not stop other "
               "servers' leases at once";
    }

    auto ms = parse_time_ms(*v[kBan]);

    if (!ms || *ms < 1000 || *ms > kMaxBanMs || *ms % 1000 != 0) {
        return "invalid ban " + quoted(*v[kBan])
               + ": whole seconds from 1s to 365d, such as 15m or 1h";
    }

    out->ban_ms = *ms;
    return std::nullopt;
}

// A rate zone's `top=K` (kTopMinCapacity..kTopMaxCapacity counters of its
// top subjects per time slice) or `top=off`; kTopDefault (off) without it.
std::optional<std::string> read_top(const ZoneValues &v, ZoneParams *out)
{
    if (!v[kTop]) {
        return std::nullopt;
    }

    if (*v[kTop] == "off") {
        out->top = 0;
        return std::nullopt;
    }

    auto k = parse_count(*v[kTop]);

    if (!k || *k < kTopMinCapacity || *k > kTopMaxCapacity) {
        return "invalid top " + quoted(*v[kTop]) + ": the counters of the "
               "zone's top subjects, " + std::to_string(kTopMinCapacity)
               + " to " + std::to_string(kTopMaxCapacity) + ", or off";
    }

    out->top = static_cast<std::uint32_t>(*k);
    return std::nullopt;
}

// The error of `token`, a parameter of the other kind of zone than `form`,
// `zone`'s: which kind takes it.  Nothing for a parameter neither takes.
std::optional<std::string> other_kind_text(std::string_view zone,
                                           std::string_view token,
                                           unsigned form)
{
    std::size_t eq = token.find('=');

    if (eq == std::string_view::npos) {
        return std::nullopt;
    }

    std::string param = quoted(token.substr(0, eq + 1));

    for (const NamedParam &known : kZoneParams) {
        if (known.name != token.substr(0, eq) || (known.forms & form) != 0) {
            continue;
        }

        if (form == kRateForm) {
            return param + " is for concurrency zones (concurrency=); "
                   + quoted(zone) + " is a rate zone";
        }

        return param + " is for rate zones; " + quoted(zone)
               + " is a concurrency zone (concurrency=)";
    }

    return std::nullopt;
}

// A zone with `concurrency=` is a concurrency zone, whatever else it has.
ZoneKind zone_kind(const ParamTokens &tokens)
{
    for (std::size_t i = 1; i < tokens.size(); i++) {
        if (tokens[i].substr(0, 12) == "concurrency=") {
            return ZoneKind::kConcurrency;
        }
    }

    return ZoneKind::kRate;
}

}  // namespace

ParamResult<ZoneParams> parse_zone_params(const ParamTokens &tokens)
{
    ParamResult<ZoneParams> result;
    ZoneParams &zone = result.params;
    zone.name = tokens.empty() ? std::string_view() : tokens[0];

    if (!valid_name(zone.name)) {
        result.error = ParamError{
            "invalid zone name " + quoted(zone.name)
                + ": use letters, digits, \"_\", \"-\" and \".\"",
            0};
        return result;
    }

    zone.kind = zone_kind(tokens);
    unsigned form = zone.kind == ZoneKind::kConcurrency ? kConcurrencyForm
                                                        : kRateForm;
    ZoneValues values;

    for (std::size_t i = 1; i < tokens.size(); i++) {
        auto error = take_named_param(kZoneParams, kZoneParamCount, form,
                                      tokens[i], values);
        if (error) {
            auto hint = other_kind_text(zone.name, tokens[i], form);
            result.error = ParamError{hint ? std::move(*hint)
                                           : std::move(*error), i};
            return result;
        }
    }

    std::optional<std::string> error;

    if (zone.kind == ZoneKind::kConcurrency) {
        error = read_concurrency(values, &zone.concurrency);
    } else {
        error = read_rate_window(zone.name, values, &zone);
        error = error ? error : read_buckets(values, &zone);
        error = error ? error : read_lease_size(values, &zone);
        error = error ? error : read_ban(values, &zone);
        error = error ? error : read_top(values, &zone);
    }

    zone.key = values[kKey].value_or("");

    if (!error && zone.key.empty()) {
        error = "no \"key=\" is defined for ratelimit_zone "
                + quoted(zone.name);
    }

    if (error) {
        result.error = ParamError{std::move(*error), tokens.size()};
    } else if (zone.kind == ZoneKind::kRate) {
        // A calendar zone's keys go at the end of their period.
        bool calendar = zone.policy.algorithm == Algorithm::kCalendar;
        zone.warnings = policy_warnings(
            zone.policy, calendar ? "" : values[kWindow].value_or(""),
            values[kBucket].value_or(""));
    }

    return result;
}

}  // namespace ratelimit
