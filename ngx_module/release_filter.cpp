#include "release_filter.hpp"

#include "request_state.hpp"
#include "slot_hold.hpp"

namespace ratelimit {

namespace {

ngx_http_output_body_filter_pt next_body_filter;

// The main request's last buffer has passed, and nothing of the response
// waits in nginx: not in the write filter's chain, not in a buffering
// filter or TLS or an HTTP/2 stream (c->buffered), not behind a
// subrequest.  What is left is sent again through here (`in` nullptr) by
// nginx's writer, which makes the last of these calls.
ngx_int_t release_filter(ngx_http_request_t *r, ngx_chain_t *in) noexcept
{
    ngx_int_t rc = next_body_filter(r, in);
    bool last = false;

    for (ngx_chain_t *cl = in; cl != nullptr; cl = cl->next) {
        last = last || cl->buf->last_buf;
    }

    if (r != r->main || (in != nullptr && !last)) {
        return rc;
    }

    RequestState *state = find_state(r);
    SlotHold *hold = state != nullptr ? state->hold : nullptr;

    if (hold == nullptr) {
        return rc;
    }

    hold->last_buf_passed = hold->last_buf_passed || last;

    if (hold->last_buf_passed && rc == NGX_OK && r->out == nullptr
        && !r->connection->buffered && r->postponed == nullptr)
    {
        release_slot(hold);
    }

    return rc;
}

}  // namespace

ngx_int_t install_release_filter(ngx_conf_t *) noexcept
{
    next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = release_filter;
    return NGX_OK;
}

}  // namespace ratelimit
