#include "limits/gcra.hpp"

#include <cmath>

namespace ratelimit {

std::uint64_t gcra_wait_ms(const Policy &policy, std::uint64_t ahead_us,
                           std::uint64_t cost, std::uint64_t delay)
{
    if (delay == kNoDelay) {
        return 0;
    }

    double wait_us = static_cast<double>(ahead_us)
                     - static_cast<double>(delay + cost)
                           * policy.emission_us();

    return wait_us > 0 ? static_cast<std::uint64_t>(std::llround(wait_us
                                                                 / 1000))
                       : 0;
}

std::uint64_t gcra_capacity(const Policy &policy)
{
    return 1 + policy.burst;
}

ZoneStatus gcra_status(const Policy &policy, std::uint64_t ahead_us,
                       std::uint64_t, bool over, std::uint64_t)
{
    double t = policy.emission_us();
    double ahead = static_cast<double>(ahead_us);
    ZoneStatus status{gcra_capacity(policy), 0, 0};
    double room = static_cast<double>(status.limit) * t - ahead;

    // A microsecond of slack, as the script allows: ahead is rounded.
    if (!over && room > -1) {
        auto fit = static_cast<std::uint64_t>(std::floor((room + 1) / t));
        status.remaining = fit < status.limit ? fit : status.limit;
    }

    double until_us = over ? ahead - static_cast<double>(policy.burst) * t
                           : ahead;

    if (until_us > 0) {
        status.reset_ms = static_cast<std::uint64_t>(std::ceil(until_us
                                                               / 1000));
    }

    return status;
}

std::uint64_t gcra_turns_ahead(const Policy &policy, std::uint64_t ahead_us)
{
    // A microsecond of slack, as the script allows: ahead is rounded.
    double turns = (static_cast<double>(ahead_us) - 1) / policy.emission_us();

    return turns > 0 ? static_cast<std::uint64_t>(std::ceil(turns)) : 0;
}

std::uint64_t gcra_window_s(const Policy &policy, std::uint64_t)
{
    double us = static_cast<double>(gcra_capacity(policy))
                * policy.emission_us();
    auto s = static_cast<std::uint64_t>(std::ceil(us / 1e6));

    return s > 0 ? s : 1;
}

}  // namespace ratelimit
