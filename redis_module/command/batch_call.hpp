// The arguments of one RATELIMIT.DECIDE call, read and checked: the keys,
// each zone's parameters and the requests' entries (zones/batch.hpp).
#pragma once

#include <cstddef>

#include "api/redis_module_api.hpp"
#include "zones/batch.hpp"

namespace ratelimit {

struct BatchCall : Batch {
    redis::String **keys;
    std::size_t key_count;

    // Reads argv (the command's name first) at Redis time `now_ms`, or
    // `now_us` in microseconds; on malformed arguments returns the error to
    // answer, else nullptr.
    const char *parse(redis::String **argv, int argc, double now_ms,
                      double now_us);
};

// The number of keys a call names, for Redis's getkeys question (the keys
// follow it from argv[2]); -1 if it is not one.
long long declared_keys(redis::String **argv, int argc) noexcept;

}  // namespace ratelimit
