#include "limits/override.hpp"

#include "limits/algorithms.hpp"

namespace ratelimit {

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
