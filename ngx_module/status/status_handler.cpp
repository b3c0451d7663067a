#include "status/status_handler.hpp"

#include <new>

#include "calendar/local_time_text.hpp"
#include "rate/script_call.hpp"
#include "rate/zone_values.hpp"
#include "limits/algorithms.hpp"
#include "limits/sliding_window.hpp"
#include "concurrency/permit_report.hpp"
#include "report/status_json.hpp"

namespace ratelimit {

ngx_int_t send_body(ngx_http_request_t *r, ngx_uint_t status,
                    std::string_view content_type, u_char *body,
                    size_t len) noexcept
{
    r->headers_out.status = status;
    r->headers_out.content_length_n = static_cast<off_t>(len);
    r->headers_out.content_type.len = content_type.size();
    r->headers_out.content_type.data = reinterpret_cast<u_char *>(
        const_cast<char *>(content_type.data()));
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = nullptr;

    ngx_int_t rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    ngx_buf_t *b = static_cast<ngx_buf_t *>(ngx_calloc_buf(r->pool));

    if (b == nullptr) {
        return NGX_ERROR;
    }

    b->pos = body;
    b->last = body + len;
    b->memory = 1;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    ngx_chain_t out = {b, nullptr};
    return ngx_http_output_filter(r, &out);
}

namespace {

ngx_int_t send_json(ngx_http_request_t *r, ngx_uint_t status, u_char *body,
                    size_t len)
{
    return send_body(r, status, "application/json", body, len);
}

}  // namespace

ngx_int_t send_error(ngx_http_request_t *r, ngx_uint_t status,
                     const char *message) noexcept
{
    u_char *body = static_cast<u_char *>(
        ngx_pnalloc(r->pool, ngx_strlen(message) + 16));

    if (body == nullptr) {
        return NGX_ERROR;
    }

    u_char *end = ngx_sprintf(body, "{\"error\":\"%s\"}", message);
    return send_json(r, status, body, static_cast<size_t>(end - body));
}

const char *read_subject(ngx_http_request_t *r, ngx_str_t *subject) noexcept
{
    ngx_str_t raw;

    if (ngx_http_arg(r, (u_char *) "key", 3, &raw) == NGX_OK) {
        auto *dst = static_cast<u_char *>(ngx_pnalloc(r->pool, raw.len));

        if (dst == nullptr) {
            return "out of memory";
        }

        u_char *src = raw.data;
        subject->data = dst;
        ngx_unescape_uri(&dst, &src, raw.len, 0);
        subject->len = static_cast<size_t>(dst - subject->data);

    } else if (ngx_http_arg(r, (u_char *) "key_hex", 7, &raw) == NGX_OK) {
        if (raw.len % 2 != 0) {
            return "key_hex must have an even number of hex digits";
        }

        subject->len = raw.len / 2;
        subject->data = static_cast<u_char *>(
            ngx_pnalloc(r->pool, subject->len + 1));

        if (subject->data == nullptr) {
            return "out of memory";
        }

        for (size_t i = 0; i < subject->len; i++) {
            ngx_int_t byte = ngx_hextoi(raw.data + 2 * i, 2);

            if (byte == NGX_ERROR) {
                return "key_hex must hold hex digits only";
            }

            subject->data[i] = static_cast<u_char>(byte);
        }

    } else {
        return "missing key: use ?key=... or ?key_hex=...";
    }

    return subject->len > 0 ? nullptr
                            : "missing key: use ?key=... or ?key_hex=...";
}

const Zone *query_zone(ngx_http_request_t *r, const char *usage,
                       const char **error) noexcept
{
    const LocConf *lcf = loc_conf(r);
    ngx_str_t name;

    if (ngx_http_arg(r, (u_char *) "zone", 4, &name) != NGX_OK
        || name.len == 0)
    {
        *error = usage;
        return nullptr;
    }

    auto *refs = static_cast<const ZoneRef *>(lcf->query->elts);

    for (ngx_uint_t i = 0; i < lcf->query->nelts; i++) {
        if (view(refs[i].zone->name) == view(name)) {
            return refs[i].zone;
        }
    }

    *error = "no such zone here: name one of this location's "
             "ratelimit_query zones";
    return nullptr;
}

namespace {

// ?interval= in nginx's time syntax (20s, 500ms, 1m; a bare number is
// seconds) into `ms`, 0 if absent.  Returns nullptr on success, else the
// error to answer 400 with.
const char *read_interval(ngx_http_request_t *r, std::uint64_t *ms)
{
    ngx_str_t raw;

    *ms = 0;

    if (ngx_http_arg(r, (u_char *) "interval", 8, &raw) != NGX_OK) {
        return nullptr;
    }

    ngx_int_t parsed = ngx_parse_time(&raw, 0);

    if (parsed == NGX_ERROR || parsed == 0) {
        return "interval must be a time of 1ms or more: 20s, 500ms, 1m";
    }

    *ms = static_cast<std::uint64_t>(parsed);
    return nullptr;
}

// Sets state->interval_ms and the buckets each of its zones sums for it
// (none for a zone that answers no interval, as GCRA's: it keeps no
// buckets, and its answer has no interval fields).  Returns nullptr on
// success, else the error to answer 400 with (in r's pool): the interval
// is longer than a window zone's window.
const char *plan_interval(RequestState *state, std::uint64_t interval_ms)
{
    ngx_pool_t *pool = state->r->pool;
    auto *buckets = static_cast<std::uint64_t *>(
        ngx_palloc(pool, state->zones * sizeof(std::uint64_t)));

    if (buckets == nullptr) {
        return "out of memory";
    }

    for (ngx_uint_t i = 0; i < state->zones; i++) {
        const Zone *zone = state->refs[i]->zone;

        if (!row_of(zone->policy).answers_interval) {
            buckets[i] = 1;  // in the call's range; not read for this zone
            continue;
        }

        if (interval_ms > zone->policy.window_ms) {
            auto *error = static_cast<u_char *>(
                ngx_pnalloc(pool, 96 + zone->name.len + 2 * NGX_INT64_LEN));

            if (error == nullptr) {
                return "out of memory";
            }

            ngx_sprintf(error, "interval of %uL ms is longer than the "
                        "window of zone %V, %uL ms%Z", interval_ms,
                        &zone->name, zone->policy.window_ms);
            return reinterpret_cast<const char *>(error);
        }

        buckets[i] = SlidingWindow(zone->policy).interval_buckets(interval_ms);
    }

    state->interval_ms = interval_ms;
    state->interval_buckets = buckets;
    return nullptr;
}

// `utc_ms` as ISO 8601 local time in the zone, in `pool`; empty on no
// memory.
std::string_view local_time_text(ngx_pool_t *pool, const TimeZone &zone,
                                 std::int64_t utc_ms)
{
    try {
        std::string text = iso8601_local(zone, utc_ms);
        auto *copy = static_cast<char *>(ngx_pnalloc(pool, text.size()));

        if (copy != nullptr) {
            ngx_memcpy(copy, text.data(), text.size());
            return {copy, text.size()};
        }
    } catch (const std::bad_alloc &) {
    }

    return {};
}

// A calendar zone's period that Redis counted in at now_ms, into its
// report; false on no memory.
bool report_period(ngx_pool_t *pool, const Zone &zone, const Policy &policy,
                   std::uint64_t now_ms, ZoneReport *report)
{
    if (zone.calendar == nullptr) {
        return true;
    }

    const TimeZone &tz = zone.calendar->time_zone();
    Period period = counted_period(policy, now_ms);

    report->period_start = local_time_text(pool, tz, period.start_ms);
    report->period_end = local_time_text(pool, tz, period.end_ms);
    return !report->period_start.empty() && !report->period_end.empty();
}

void finish_query(RequestState *state) noexcept
{
    ngx_http_finalize_request(state->r, send_status(state));
}

// The rate zones' call; false if the answer is known at once.
bool ask_query_zones(RequestState *state)
{
    if (state->zones == 0) {
        state->result = Result::kPeeked;
        return false;
    }

    return send_call(state);
}

// Once the concurrency zones are reported on: the rate zones, if any.
void query_rate_zones(RequestState *state) noexcept
{
    if (state->result == Result::kError || !ask_query_zones(state)) {
        finish_query(state);
    }
}

// The location's zones, rate zones in state->refs and concurrency zones in
// state->permit_report, each at its place in the answer; false on no memory.
// A rate zone whose limit is a variable has it evaluated for the query's
// own request, and is left out of the answer where its value is empty or
// no limit.
bool take_zones(RequestState *state, const ngx_array_t *zones,
                const ngx_str_t &subject)
{
    auto *refs = static_cast<const ZoneRef *>(zones->elts);
    ngx_uint_t position = 0;

    for (ngx_uint_t i = 0; i < zones->nelts; i++) {
        if (refs[i].zone->concurrency != nullptr) {
            if (!add_permit_report(state, &refs[i], subject, position++)) {
                return false;
            }
            continue;
        }

        std::uint64_t limit = 0;

        switch (find_limit(state->r, *refs[i].zone, "left out of the answer",
                           &limit))
        {
        case ValueFound::kFound:
            break;
        case ValueFound::kEmpty:
        case ValueFound::kInvalid:
        case ValueFound::kBlocked:
            continue;
        case ValueFound::kError:
            return false;
        }

        state->refs[state->zones] = &refs[i];
        state->subjects[state->zones] = subject;
        state->limits[state->zones] = limit;
        state->zones++;
        position++;
    }

    return true;
}

}  // namespace

ngx_int_t send_status(RequestState *state) noexcept
{
    ngx_http_request_t *r = state->r;

    if (state->result != Result::kPeeked) {
        return send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                          "redis unavailable");
    }

    const PermitReport *slots = state->permit_report;
    ngx_uint_t n = state->zones + (slots != nullptr ? slots->entries : 0);
    ngx_uint_t rate = 0, slot = 0;
    ZoneReport reports[kMaxZonesPerRequest];

    for (ngx_uint_t k = 0; k < n; k++) {
        if (slots != nullptr && slot < slots->entries
            && slots->entry[slot].position == k)
        {
            const PermitReport::Entry &e = slots->entry[slot++];
            reports[k] = report_permit_zone(view(e.ref->zone->name),
                                            view(e.subject),
                                            *e.ref->zone->concurrency,
                                            e.in_flight, e.queued);
            continue;
        }

        const Zone *zone = state->refs[rate]->zone;
        Policy policy = policy_of(state, rate);
        reports[k] = report_zone(view(zone->name),
                                 view(state->subjects[rate]), policy,
                                 state->counts[rate], state->now_ms);

        if (!report_period(r->pool, *zone, policy, state->now_ms,
                           &reports[k]))
        {
            return NGX_ERROR;
        }

        if (state->interval_ms > 0) {
            report_interval(&reports[k], policy, state->interval_ms,
                            state->counts[rate]);
        }

        rate++;
    }

    auto *body = static_cast<u_char *>(ngx_pnalloc(
        r->pool, status_json_max_size(reports, n)));

    if (body == nullptr) {
        return NGX_ERROR;
    }

    size_t len = write_status_json(reports, n,
                                   reinterpret_cast<char *>(body));
    return send_json(r, NGX_HTTP_OK, body, len);
}

ngx_int_t query_handler(ngx_http_request_t *r) noexcept
{
    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    ngx_int_t rc = ngx_http_discard_request_body(r);

    if (rc != NGX_OK) {
        return rc;
    }

    ngx_str_t subject;
    std::uint64_t interval_ms;

    if (const char *error = read_subject(r, &subject)) {
        return send_error(r, NGX_HTTP_BAD_REQUEST, error);
    }

    if (const char *error = read_interval(r, &interval_ms)) {
        return send_error(r, NGX_HTTP_BAD_REQUEST, error);
    }

    const LocConf *lcf = loc_conf(r);
    RequestState *state = create_state(r, lcf->query->nelts, false);

    if (state == nullptr) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    state->lcf = lcf;
    state->peek = true;
    state->resume = finish_query;

    if (!take_zones(state, lcf->query, subject)) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (interval_ms > 0) {
        if (const char *error = plan_interval(state, interval_ms)) {
            return send_error(r, NGX_HTTP_BAD_REQUEST, error);
        }
    }

    if (!build_keys(state)) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    bool waits = state->permit_report != nullptr
                 ? send_permit_report(state, query_rate_zones)
                 : ask_query_zones(state);

    if (!waits) {
        return send_status(state);
    }

    r->main->count++;
    return NGX_DONE;
}

}  // namespace ratelimit
