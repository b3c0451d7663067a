#include "top/top_memory.hpp"

#include <vector>

#include "top/top_summary.hpp"

namespace ratelimit {

namespace top {

namespace {

// A time slice's place: its index (Unix seconds / kTopSliceS), whether a
// worker took it to flush, then its two summaries.
struct TopSlot {
    std::uint64_t slice;
    std::uint64_t flushed;
};

std::size_t slot_size(std::uint32_t capacity)
{
    return sizeof(TopSlot) + 2 * top_summary_size(capacity);
}

TopSlot *slot_of(ngx_shm_zone_t *shm, const Zone &zone, std::uint64_t slice)
{
    auto *block = static_cast<char *>(shm->data) + zone.top_offset;
    return reinterpret_cast<TopSlot *>(block
                                       + (slice % 2) * slot_size(zone.top));
}

TopSummary *requests_of(TopSlot *slot)
{
    return reinterpret_cast<TopSummary *>(slot + 1);
}

TopSummary *rejections_of(TopSlot *slot, std::uint32_t capacity)
{
    return reinterpret_cast<TopSummary *>(
        reinterpret_cast<char *>(slot + 1) + top_summary_size(capacity));
}

ngx_slab_pool_t *pool_of(ngx_shm_zone_t *shm)
{
    return reinterpret_cast<ngx_slab_pool_t *>(shm->shm.addr);
}

const MainConf *conf_of(ngx_shm_zone_t *shm)
{
    return static_cast<const MainConf *>(shm->data);
}

// Every slot empty, of a slice no clock reaches.
void lay_out(const MainConf &mcf, char *block)
{
    auto **zones = static_cast<Zone **>(mcf.zones.elts);

    for (ngx_uint_t i = 0; i < mcf.zones.nelts; i++) {
        const Zone &zone = *zones[i];

        for (std::uint64_t s = 0; zone.top > 0 && s < 2; s++) {
            auto *slot = reinterpret_cast<TopSlot *>(
                block + zone.top_offset + s * slot_size(zone.top));
            *slot = {~std::uint64_t{0}, 1};
            top_init(requests_of(slot), zone.top);
            top_init(rejections_of(slot, zone.top), zone.top);
        }
    }
}

// The zone's data is its block; until init, its MainConf, to lay it out.
ngx_int_t init_shared_zone(ngx_shm_zone_t *shm, void *old) noexcept
{
    ngx_slab_pool_t *pool = pool_of(shm);

    if (old != nullptr) {
        shm->data = old;
        return NGX_OK;
    }

    if (shm->shm.exists) {
        shm->data = pool->data;
        return NGX_OK;
    }

    const MainConf &mcf = *conf_of(shm);
    std::size_t size = 0;
    auto **zones = static_cast<Zone **>(mcf.zones.elts);

    for (ngx_uint_t i = 0; i < mcf.zones.nelts; i++) {
        size += top_zone_size(zones[i]->top);
    }

    auto *block = static_cast<char *>(ngx_slab_alloc(pool, size));

    if (block == nullptr) {
        return NGX_ERROR;
    }

    lay_out(mcf, block);
    pool->data = block;
    shm->data = block;
    return NGX_OK;
}

// FNV-1a over the zones' names and capacities, as the zone's name.
std::uint64_t layout_hash(const MainConf &mcf)
{
    std::string text;
    auto **zones = static_cast<Zone **>(mcf.zones.elts);

    for (ngx_uint_t i = 0; i < mcf.zones.nelts; i++) {
        text.append(view(zones[i]->name)).append(1, '=');
        text.append(std::to_string(zones[i]->top)).append(1, ',');
    }

    return top_key_hash(text);
}

}  // namespace

std::size_t top_zone_size(std::uint32_t capacity)
{
    return capacity > 0 ? 2 * slot_size(capacity) : 0;
}

ngx_int_t add_shared_zone(ngx_conf_t *cf, MainConf *mcf) noexcept
{
    std::size_t size = 0;
    auto **zones = static_cast<Zone **>(mcf->zones.elts);

    for (ngx_uint_t i = 0; i < mcf->zones.nelts; i++) {
        zones[i]->top_offset = size;
        size += top_zone_size(zones[i]->top);
    }

    if (size == 0 || mcf->redis == nullptr || !mcf->used) {
        return NGX_OK;
    }

    std::uint64_t hash;

    try {
        hash = layout_hash(*mcf);
    } catch (...) {
        return NGX_ERROR;
    }

    // nginx keeps the name's pointer: in the configuration's pool.
    ngx_str_t name;
    name.data = static_cast<u_char *>(ngx_pnalloc(cf->pool, 32));

    if (name.data == nullptr) {
        return NGX_ERROR;
    }

    name.len = static_cast<size_t>(
        ngx_sprintf(name.data, "ratelimit_top_%016xL", hash) - name.data);

    // The slab allocator's own pages besides the block.
    ngx_shm_zone_t *shm = ngx_shared_memory_add(
        cf, &name, size + 16 * ngx_pagesize, &ngx_http_ratelimit_module);

    if (shm == nullptr) {
        return NGX_ERROR;
    }

    shm->init = init_shared_zone;
    shm->data = mcf;
    mcf->top_zone = shm;
    return NGX_OK;
}

void record(ngx_shm_zone_t *shm, const Zone &zone, std::string_view subject,
            bool rejected, std::uint64_t now_s) noexcept
{
    char key[kTopKeyBytes];
    std::string_view stored(key, write_top_key(subject, key));
    std::uint64_t slice = now_s / kTopSliceS;
    ngx_slab_pool_t *pool = pool_of(shm);

    ngx_shmtx_lock(&pool->mutex);

    TopSlot *slot = slot_of(shm, zone, slice);

    // A slice the timer never took (no worker ran it for a whole slice)
    // is dropped.
    if (slot->slice != slice) {
        *slot = {slice, 0};
        top_clear(requests_of(slot));
        top_clear(rejections_of(slot, zone.top));
    }

    top_count(requests_of(slot), stored);

    if (rejected) {
        top_count(rejections_of(slot, zone.top), stored);
    }

    ngx_shmtx_unlock(&pool->mutex);
}

bool take_finished(ngx_shm_zone_t *shm, const Zone &zone,
                   std::uint64_t now_s, TopFlush *flush)
{
    std::uint64_t slice = now_s / kTopSliceS - 1;
    std::vector<char> copy(slot_size(zone.top));
    ngx_slab_pool_t *pool = pool_of(shm);

    ngx_shmtx_lock(&pool->mutex);

    TopSlot *slot = slot_of(shm, zone, slice);
    bool taken = slot->slice == slice && !slot->flushed;

    if (taken) {
        slot->flushed = 1;
        ngx_memcpy(copy.data(), slot, copy.size());
    }

    ngx_shmtx_unlock(&pool->mutex);

    auto *mine = reinterpret_cast<TopSlot *>(copy.data());
    const TopSummary *q = requests_of(mine);
    const TopSummary *j = rejections_of(mine, zone.top);

    if (!taken || q->total == 0) {
        return false;
    }

    *flush = {{}, slice * kTopSliceS, q->total, j->total, top_error(*q),
              top_error(*j), {}, {}, q->used};

    for (const TopSummary *s : {q, j}) {
        const TopCounter *c = top_counters(s);

        for (std::uint32_t i = 0; i < s->used; i++) {
            flush->keys.emplace_back(c[i].key, c[i].len);
            flush->counts.push_back(c[i].count);
        }
    }

    return true;
}

}  // namespace top

}  // namespace ratelimit
