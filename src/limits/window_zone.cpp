#include "limits/window_zone.hpp"

#include "limits/sliding_window.hpp"

namespace ratelimit {

std::uint64_t window_quota(const Policy &policy)
{
    return policy.limit;
}

std::uint64_t window_length_s(const Policy &policy, std::uint64_t)
{
    return policy.window_seconds();
}

std::uint64_t window_buckets(const Policy &policy)
{
    return policy.buckets();
}

ZoneStatus window_status(const Policy &policy, std::uint64_t total,
                         std::uint64_t oldest, bool over,
                         std::uint64_t now_ms)
{
    ZoneStatus status{policy.limit, 0, 0};

    if (!over && total < policy.limit) {
        status.remaining = policy.limit - total;
    }

    if (oldest != 0) {
        status.reset_ms = SlidingWindow(policy).ms_until_expiry(oldest,
                                                                 now_ms);
    }

    return status;
}

std::uint64_t window_used(const Policy &, std::uint64_t total)
{
    return total;
}

std::uint64_t window_wait_ms(const Policy &, std::uint64_t, std::uint64_t,
                             std::uint64_t)
{
    return 0;
}

}  // namespace ratelimit
