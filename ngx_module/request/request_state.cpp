#include "request/request_state.hpp"

#include <new>

#include "keys/subject_key.hpp"

namespace ratelimit {

namespace {

// Runs when the request's pool is destroyed: the request is gone, so a reply
// still on its way must find nothing to resume.
void release_state(RequestState *state)
{
    if (state->release_hook != nullptr) {
        state->release_hook(state);
    }

    stop_timer(&state->wake);

    if (state->wake.posted) {
        ngx_delete_posted_event(&state->wake);
    }
}

void cleanup_state(void *data) noexcept
{
    release_state(static_cast<RequestState *>(data));
}

// The same, under another name: find_state() looks for cleanup_state only.
void cleanup_query_state(void *data) noexcept
{
    release_state(static_cast<RequestState *>(data));
}

}  // namespace

void resume_request(RequestState *state,
                    void (*next)(RequestState *state) noexcept) noexcept
{
    ngx_http_request_t *r = state->r;
    ngx_connection_t *c = r->connection;

    ngx_http_set_log_request(c->log, r);
    next(state);
    ngx_http_run_posted_requests(c);
}

RequestState *find_state(ngx_http_request_t *r) noexcept
{
    ngx_http_request_t *main = r->main;
    auto *state = static_cast<RequestState *>(
        ngx_http_get_module_ctx(main, ngx_http_ratelimit_module));

    if (state != nullptr) {
        return state;
    }

    for (ngx_pool_cleanup_t *c = main->pool->cleanup; c; c = c->next) {
        if (c->handler == cleanup_state) {
            state = static_cast<RequestState *>(c->data);
            ngx_http_set_ctx(main, state, ngx_http_ratelimit_module);
            return state;
        }
    }

    return nullptr;
}

bool make_subject_key(ngx_http_request_t *r, const Zone &zone,
                      const ngx_str_t &subject, ngx_str_t *key) noexcept
{
    MainConf *mcf = main_conf(r);
    std::string_view prefix = view(mcf->prefix);
    HashTag hash_tag{view(mcf->redis->tag_key)};
    const HashTag *tag = mcf->redis->cluster ? &hash_tag : nullptr;
    auto *text = static_cast<char *>(ngx_pnalloc(
        r->pool, subject_key_size(prefix, view(zone.name), view(subject),
                                  tag)));

    if (text == nullptr) {
        return false;
    }

    key->data = reinterpret_cast<u_char *>(text);
    key->len = write_subject_key(prefix, view(zone.name), view(subject),
                                 text, tag);
    return true;
}

RequestState *create_state(ngx_http_request_t *r, bool findable) noexcept
{
    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(r->pool,
                                                   sizeof(RequestState));

    if (cln == nullptr) {
        return nullptr;
    }

    auto *state = new (cln->data) RequestState();
    state->r = r;

    if (!findable) {
        cln->handler = cleanup_query_state;
        return state;
    }

    cln->handler = cleanup_state;
    ngx_http_set_ctx(r, state, ngx_http_ratelimit_module);
    return state;
}

}  // namespace ratelimit
