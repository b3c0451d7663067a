#include "http/header_filter.hpp"

#include "limits/algorithms.hpp"
#include "limits/rate_headers.hpp"
#include "request/request_state.hpp"
#include "limits/sliding_window.hpp"

namespace ratelimit {

bool add_number(ngx_http_request_t *r, ngx_str_t name, std::uint64_t value)
{
    auto *text = static_cast<u_char *>(ngx_pnalloc(r->pool, kMaxDigits));

    if (text == nullptr) {
        return false;
    }

    size_t len = write_decimal(value, reinterpret_cast<char *>(text));
    return add_header(r, name, {len, text});
}

namespace {

ngx_http_output_header_filter_pt next_header_filter;

// Retry-After, and in a gRPC answer grpc-retry-pushback-ms: the same wait,
// in ms.
bool add_retry_after(ngx_http_request_t *r, const RequestState *state,
                     std::uint64_t seconds)
{
    return add_number(r, ngx_string("Retry-After"), seconds)
           && (!state->grpc
               || add_number(r, ngx_string("grpc-retry-pushback-ms"),
                             seconds * 1000));
}

// Whether zone i's RateLimit-Policy member is written for the request, not
// the zone's own: its limit is a variable, it is a GCRA zone (its burst is
// the location's) or a calendar zone (w is its period's length), or the
// subject's override applied.
bool own_member(const RequestState *state, ngx_uint_t i)
{
    return state->refs[i]->zone->policy_member.len == 0
           || state->counts[i].override.set;
}

// RateLimit-Policy lists every zone the request was decided in, each with
// the limit it applied (own_member()): a GCRA zone's quota is its
// capacity, 1 + burst requests at once, over the time they take at its
// rate.
bool add_policy(ngx_http_request_t *r, const RequestState *state)
{
    static const char kSeparator[] = ", ";
    size_t len = 0;

    for (ngx_uint_t i = 0; i < state->zones; i++) {
        const Zone &zone = *state->refs[i]->zone;
        len += (own_member(state, i)
                    ? policy_member_max_size(view(zone.name))
                    : zone.policy_member.len)
               + sizeof(kSeparator) - 1;
    }

    auto *text = static_cast<u_char *>(ngx_pnalloc(r->pool, len));

    if (text == nullptr) {
        return false;
    }

    u_char *p = text;

    for (ngx_uint_t i = 0; i < state->zones; i++) {
        if (i > 0) {
            p = ngx_cpymem(p, kSeparator, sizeof(kSeparator) - 1);
        }

        const Zone &zone = *state->refs[i]->zone;

        if (own_member(state, i)) {
            Policy policy = policy_of(state, i);
            const AlgorithmRow &row = row_of(policy);
            bool blocked = policy.limit == 0;  // a limit of 0: no turns
            std::uint64_t window_s = blocked
                                     ? policy.window_seconds()
                                     : row.window_s(policy, state->now_ms);
            p += write_policy_member(view(zone.name),
                                     blocked ? 0 : row.quota(policy),
                                     window_s, reinterpret_cast<char *>(p));
            continue;
        }

        p = ngx_cpymem(p, zone.policy_member.data, zone.policy_member.len);
    }

    return add_header(r, ngx_string("RateLimit-Policy"),
                      {static_cast<size_t>(p - text), text});
}

bool add_ratelimit(ngx_http_request_t *r, const RequestState *state)
{
    const Verdict &v = state->verdict;
    std::string_view zone = view(state->refs[v.zone]->zone->name);
    std::uint64_t reset_s = seconds_ceil(v.status.reset_ms);
    auto *text = static_cast<u_char *>(
        ngx_pnalloc(r->pool, ratelimit_field_max_size(zone)));

    if (text == nullptr) {
        return false;
    }

    size_t len = write_ratelimit_field(zone, v.status.remaining, reset_s,
                                       reinterpret_cast<char *>(text));

    return add_header(r, ngx_string("RateLimit"), {len, text})
           && add_number(r, ngx_string("X-RateLimit-Limit"), v.status.limit)
           && add_number(r, ngx_string("X-RateLimit-Remaining"),
                         v.status.remaining)
           && add_number(r, ngx_string("X-RateLimit-Reset"),
                         state->reset_epoch_s)
           && (state->result != Result::kRejected
               || add_retry_after(r, state, retry_after_seconds(reset_s)));
}

// A request `ratelimit_fail closed` refused: Redis gave no verdict.  The
// link tries Redis again at most 500 ms after a failure (its backoff,
// redis_connection.hpp), so a client that waits a second finds the next
// try made: the smallest whole number of seconds Retry-After can say.  Not
// on another status (an error_page's answer), but on a gRPC answer's 200.
bool add_fail_retry(ngx_http_request_t *r, const RequestState *state)
{
    constexpr std::uint64_t kFailRetryAfterS = 1;

    if (state->result != Result::kError || state->peek
        || state->lcf->fail != kFailClosed
        || (!state->grpc && r->headers_out.status != state->lcf->fail_status))
    {
        return true;
    }

    return add_retry_after(r, state, kFailRetryAfterS);
}

ngx_int_t header_filter(ngx_http_request_t *r) noexcept
{
    if (r != r->main) {
        return next_header_filter(r);
    }

    const RequestState *state = find_state(r);

    if (state != nullptr && !add_fail_retry(r, state)) {
        return NGX_ERROR;
    }

    // A request limited by a concurrency zone alone has no rate to tell.
    // One only a dry-run zone would have rejected is told nothing: its
    // numbers are that zone's (none left), and it is served; see
    // docs/directives.md, ratelimit_dry_run.
    if (state == nullptr || !state->lcf->headers || state->zones == 0
        || (state->result != Result::kPassed
            && state->result != Result::kRejected))
    {
        return next_header_filter(r);
    }

    if (!add_policy(r, state) || !add_ratelimit(r, state)) {
        return NGX_ERROR;
    }

    return next_header_filter(r);
}

}  // namespace

ngx_int_t install_header_filter(ngx_conf_t *cf) noexcept
{
    next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = header_filter;
    return NGX_OK;
}

}  // namespace ratelimit
