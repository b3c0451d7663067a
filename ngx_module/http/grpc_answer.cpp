#include "http/grpc_answer.hpp"

#include "base/grpc_text.hpp"
#include "concurrency/permit_hold.hpp"
#include "http/header_filter.hpp"

namespace ratelimit {

namespace {

// gRPC's status codes (grpc's doc/statuscodes.md) as grpc-status says them.
const ngx_str_t kResourceExhausted = ngx_string("8");
const ngx_str_t kUnavailable = ngx_string("14");

// The media type of r's content-type if r is a gRPC call; empty if not.
ngx_str_t grpc_type(ngx_http_request_t *r)
{
    ngx_table_elt_t *h = r->headers_in.content_type;

    if (h == nullptr) {
        return ngx_null_string;
    }

    return {grpc_media_type(view(h->value)), h->value.data};
}

// Why the call was refused, as grpc-message says it (percent-encoded, in
// r's pool); false on no memory.
bool grpc_message(const RequestState *state, ngx_str_t *message)
{
    std::string_view why;
    ngx_str_t zone = ngx_null_string;

    if (state->result == Result::kError) {
        why = "limit could not be checked";
    } else if (state->zones == 0) {
        why = "concurrency limit of zone ";
        zone = state->hold->ref->zone->name;
    } else {
        why = state->banned ? "banned by zone " : "rate limited by zone ";
        zone = state->refs[state->verdict.zone]->zone->name;
    }

    auto *out = static_cast<char *>(ngx_pnalloc(
        state->r->pool, grpc_message_size(why.size() + zone.len)));

    if (out == nullptr) {
        return false;
    }

    size_t len = write_grpc_message(why, out);
    len += write_grpc_message(view(zone), out + len);
    *message = {len, reinterpret_cast<u_char *>(out)};
    return true;
}

// Sends the trailers-only answer to the gRPC call `state` refuses.
ngx_int_t send_grpc_refusal(RequestState *state, ngx_str_t type)
{
    ngx_http_request_t *r = state->r;
    ngx_str_t message;

    if (ngx_http_discard_request_body(r) != NGX_OK) {
        r->keepalive = 0;
    }

    if (!grpc_message(state, &message)) {
        return NGX_ERROR;
    }

    state->grpc = true;
    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_type = type;
    r->headers_out.content_type_len = type.len;
    r->headers_out.content_type_lowcase = nullptr;
    // HTTP/2 and HTTP/3 end the stream with the HEADERS frame of a header-
    // only answer; over HTTP/1.1 (gRPC-Web) its length says it is empty.
    r->headers_out.content_length_n = r->http_version < NGX_HTTP_VERSION_20
                                      ? 0 : -1;
    r->header_only = 1;

    if (!add_header(r, ngx_string("grpc-status"),
                    state->result == Result::kError ? kUnavailable
                                                    : kResourceExhausted)
        || !add_header(r, ngx_string("grpc-message"), message))
    {
        return NGX_ERROR;
    }

    return ngx_http_send_header(r);
}

}  // namespace

ngx_int_t refuse(RequestState *state, ngx_uint_t status)
{
    ngx_str_t type = grpc_type(state->r);

    if (!state->lcf->grpc || type.len == 0) {
        return static_cast<ngx_int_t>(status);
    }

    // As the peek's answer: sent and finalized here, the phases end.
    ngx_http_finalize_request(state->r, send_grpc_refusal(state, type));
    return NGX_DONE;
}

}  // namespace ratelimit
