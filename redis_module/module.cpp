// The Redis module: loaded with `redis-server --loadmodule
// ratelimit_redis.so` (or `loadmodule` in redis.conf), it adds the command
// RATELIMIT.DECIDE, which nginx uses in place of the window script on
// every connection to a Redis that has it.
#include "api/redis_module_api.hpp"
#include "command/propagation.hpp"
#include "command/window_command.hpp"

using namespace ratelimit;

extern "C" __attribute__((visibility("default"))) int RedisModule_OnLoad(
    RedisModuleCtx *ctx, RedisModuleString **, int) noexcept
{
    constexpr char kName[] = "ratelimit";
    constexpr int kVersion = 1;

    if (!redis::load_api(ctx) || redis::IsModuleNameBusy(kName)) {
        return redis::kErr;
    }

    redis::SetModuleAttribs(ctx, kName, kVersion, redis::kApiVersion1);

    // Where Redis would not let it watch, the command asks INFO every
    // call (propagation.hpp): slower, never wrong.
    watch_propagation(ctx);

    // "write": refused on a replica and under MISCONF or min-replicas, as a
    // whole.  Not "deny-oom": out of memory is decided as for the script,
    // request by request (see hash_calls.hpp).
    return redis::CreateCommand(ctx, kDecideCommand, decide_command,
                                "write getkeys-api", 0, 0, 0);
}
