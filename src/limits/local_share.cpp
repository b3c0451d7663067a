#include "limits/local_share.hpp"

namespace ratelimit {

namespace {

std::uint64_t used_in(const LocalCount &count, std::uint64_t window_end_ms)
{
    return count.window_end_ms == window_end_ms ? count.used : 0;
}

}  // namespace

std::uint64_t local_share(std::uint64_t limit, std::uint64_t servers)
{
    if (servers == 0) {
        servers = 1;
    }

    return limit / servers + (limit % servers != 0 ? 1 : 0);
}

LocalStatus local_status(const LocalCount &count, std::uint64_t share,
                         std::uint64_t window_end_ms, std::uint64_t now_ms,
                         std::uint64_t cost)
{
    std::uint64_t used = used_in(count, window_end_ms);
    std::uint64_t left = used < share ? share - used : 0;
    bool fits = cost <= left;

    return {fits, fits ? left - cost : left,
            window_end_ms > now_ms ? window_end_ms - now_ms : 0};
}

void local_add(LocalCount *count, std::uint64_t window_end_ms,
               std::uint64_t cost)
{
    count->used = used_in(*count, window_end_ms) + cost;
    count->window_end_ms = window_end_ms;
}

void local_note_full(LocalCount *count, const LocalStatus &status,
                     std::uint64_t now_ms)
{
    if (!status.fits || status.remaining == 0) {
        count->full_until_ms = now_ms + status.reset_ms;
    }
}

std::uint64_t local_limit(const LocalCount &count, std::uint64_t limit,
                          std::uint64_t now_ms)
{
    bool alive = count.override_limit > 0
                 && (count.override_end_ms == 0
                     || now_ms < count.override_end_ms);

    return alive ? count.override_limit - 1 : limit;
}

bool local_full(const LocalCount &count, std::uint64_t now_ms)
{
    return now_ms < count.full_until_ms;
}

}  // namespace ratelimit
