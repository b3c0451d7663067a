#include "limits/override.hpp"

#include "limits/algorithms.hpp"

namespace ratelimit {

std::uint64_t override_in_window(const Policy &policy,
                                 const Override &override)
{
    if (!row_of(policy).takes_turns || override.window_ms == 0) {
        return override.limit;
    }

    double in_window = static_cast<double>(override.limit)
                       * static_cast<double>(policy.window_ms)
                       / static_cast<double>(override.window_ms);
    return in_window < 9007199254740992.0
           ? static_cast<std::uint64_t>(in_window) : 9007199254740992;
}

Policy overridden(const Policy &policy, const Override &override)
{
    Policy out = policy;

    if (override.set) {
        out.limit = override.limit;

        if (row_of(policy).takes_turns) {
            out.window_ms = override.window_ms;
            out.bucket_ms = override.window_ms;
        }
    }

    return out;
}

}  // namespace ratelimit
