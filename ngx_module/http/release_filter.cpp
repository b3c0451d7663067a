#include "http/release_filter.hpp"

#include "request/request_state.hpp"
#include "concurrency/permit_hold.hpp"

namespace ratelimit {

namespace {

ngx_http_output_header_filter_pt next_header_filter;
ngx_http_output_body_filter_pt next_body_filter;

PermitHold *main_hold(ngx_http_request_t *r)
{
    if (r != r->main) {
        return nullptr;
    }

    RequestState *state = find_state(r);
    return state != nullptr ? state->hold : nullptr;
}

// The response's end has been passed on (`rc` is what the filters below
// answered), and nothing of it waits in nginx: not in the write filter's
// chain, not in a filter that buffers (r->buffered) nor in TLS or an
// HTTP/2 stream (c->buffered), not behind a subrequest.  What is left is
// sent again through the body filter (`in` nullptr) by nginx's writer,
// which makes the last of these checks.
void release_if_sent(ngx_http_request_t *r, PermitHold *hold, ngx_int_t rc)
{
    if (hold->last_buf_passed && rc == NGX_OK && r->out == nullptr
        && !r->buffered && !r->connection->buffered
        && r->postponed == nullptr)
    {
        release_permit(hold);
    }
}

// A header starts a new response (an error_page after a filter gave up on
// the first); a header-only response ends with it, as no body follows.
ngx_int_t release_header_filter(ngx_http_request_t *r) noexcept
{
    PermitHold *hold = main_hold(r);

    if (hold != nullptr) {
        hold->last_buf_passed = false;
    }

    ngx_int_t rc = next_header_filter(r);

    if (hold != nullptr && r->header_only) {
        hold->last_buf_passed = true;
        release_if_sent(r, hold, rc);
    }

    return rc;
}

// The main request's last buffer is looked for before the filters below
// see it: they may change the buffers they are given.
ngx_int_t release_body_filter(ngx_http_request_t *r, ngx_chain_t *in) noexcept
{
    bool last = false;

    for (ngx_chain_t *cl = in; cl != nullptr; cl = cl->next) {
        last = last || cl->buf->last_buf;
    }

    ngx_int_t rc = next_body_filter(r, in);

    if (in != nullptr && !last) {
        return rc;
    }

    PermitHold *hold = main_hold(r);

    if (hold != nullptr) {
        hold->last_buf_passed = hold->last_buf_passed || last;
        release_if_sent(r, hold, rc);
    }

    return rc;
}

}  // namespace

ngx_int_t install_release_filter(ngx_conf_t *) noexcept
{
    next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = release_header_filter;
    next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = release_body_filter;
    return NGX_OK;
}

}  // namespace ratelimit
