#include "leases/lease_policy.hpp"

#include <cmath>

namespace ratelimit {

namespace {

// ceil(x) of a non-negative x as units, saturating far below 2^64.
std::uint64_t units_ceil(double x)
{
    constexpr double kMost = 9007199254740992.0;  // 2^53

    if (!(x > 0)) {
        return 0;
    }

    return x >= kMost ? static_cast<std::uint64_t>(kMost)
                      : static_cast<std::uint64_t>(std::ceil(x));
}

}  // namespace

double rate_decayed(double rate, std::uint64_t elapsed_ms,
                    std::uint64_t tau_ms)
{
    double tau = tau_ms > 0 ? static_cast<double>(tau_ms) : 1;

    return rate * std::exp(-static_cast<double>(elapsed_ms) / tau);
}

double rate_observe(double rate, std::uint64_t elapsed_ms,
                    std::uint64_t cost, std::uint64_t tau_ms)
{
    double tau = tau_ms > 0 ? static_cast<double>(tau_ms) : 1;

    return rate_decayed(rate, elapsed_ms, tau_ms)
           + static_cast<double>(cost) / tau;
}

double rtt_observe(double rtt_ms, double sample_ms)
{
    if (sample_ms >= rtt_ms) {
        return sample_ms;
    }

    return rtt_ms + (sample_ms - rtt_ms) / 8;
}

std::uint64_t lease_cap(std::uint64_t limit, std::uint64_t fleet_used,
                        std::uint64_t servers, std::uint64_t share_k)
{
    std::uint64_t remaining = limit > fleet_used ? limit - fleet_used : 0;
    std::uint64_t parts = (servers > 0 ? servers : 1)
                          * (share_k > 0 ? share_k : 1);

    return remaining / parts;
}

double lease_horizon_ms(const LeaseParams &params, double rtt_ms)
{
    return static_cast<double>(params.lifetime_ms)
           + static_cast<double>(params.renew_rtts) * rtt_ms;
}

std::uint64_t lease_size(double rate, double horizon_ms, std::uint64_t cap,
                         double min_demand)
{
    if (cap == 0 || rate * horizon_ms < min_demand) {
        return 0;
    }

    std::uint64_t size = units_ceil(rate * horizon_ms);

    return size < 1 ? 1 : (size > cap ? cap : size);
}

std::uint64_t lease_low_water(double rate, const LeaseParams &params,
                              double rtt_ms, std::uint64_t size)
{
    if (size == 0) {
        return 0;
    }

    std::uint64_t mark = units_ceil(rate
                                    * static_cast<double>(params.renew_rtts)
                                    * rtt_ms);

    return mark < size ? mark : size - 1;
}

}  // namespace ratelimit
