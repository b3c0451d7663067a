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

// n objects of T, value-initialized, at *p, which then points past them.
template <typename T>
T *take_array(u_char **p, ngx_uint_t n)
{
    auto *array = reinterpret_cast<T *>(*p);

    for (ngx_uint_t i = 0; i < n; i++) {
        new (&array[i]) T();
    }

    *p += n * sizeof(T);
    return array;
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

RequestState *create_state(ngx_http_request_t *r, ngx_uint_t max_zones,
                           bool findable) noexcept
{
    // Every per-zone array's element is a multiple of 8 bytes, 8-aligned:
    // laid end to end in one allocation, each starts aligned.
    static_assert(sizeof(RequestState::Part) % alignof(std::uint64_t) == 0
                  && sizeof(ngx_str_t) % alignof(std::uint64_t) == 0
                  && sizeof(ZoneCount) % alignof(std::uint64_t) == 0);
    constexpr size_t kPerZone = sizeof(RequestState::Part)
                                + sizeof(const ZoneRef *)
                                + 2 * sizeof(ngx_str_t)
                                + 2 * sizeof(std::uint64_t)
                                + sizeof(ZoneCount);

    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(r->pool,
                                                   sizeof(RequestState));
    // Not ngx_pcalloc(): take_array() value-initializes every entry.
    auto *p = static_cast<u_char *>(ngx_palloc(r->pool,
                                               max_zones * kPerZone));

    if (cln == nullptr || p == nullptr) {
        return nullptr;
    }

    auto *state = new (cln->data) RequestState();
    state->r = r;
    state->asked_ms = wall_clock_ms();
    state->part = take_array<RequestState::Part>(&p, max_zones);
    state->refs = take_array<const ZoneRef *>(&p, max_zones);
    state->subjects = take_array<ngx_str_t>(&p, max_zones);
    state->keys = take_array<ngx_str_t>(&p, max_zones);
    state->limits = take_array<std::uint64_t>(&p, max_zones);
    state->costs = take_array<std::uint64_t>(&p, max_zones);
    state->counts = take_array<ZoneCount>(&p, max_zones);

    if (!findable) {
        cln->handler = cleanup_query_state;
        return state;
    }

    cln->handler = cleanup_state;
    ngx_http_set_ctx(r, state, ngx_http_ratelimit_module);
    return state;
}

}  // namespace ratelimit
