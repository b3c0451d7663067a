#include "command/window_command.hpp"

#include <sys/time.h>

#include <cmath>

#include "command/batch_call.hpp"
#include "command/propagation.hpp"
#include "redis_store/redis_store.hpp"
#include "zones/batch_decider.hpp"

namespace ratelimit {

namespace {

// Its keys are read and written, as EVAL's are (ACL key patterns: both
// %R~ and %W~ must allow them), and Cluster finds their slot from them.
void declare_keys(redis::Ctx *ctx, redis::String **argv, int argc)
{
    long long keys = declared_keys(argv, argc);

    for (long long i = 0; i < keys; i++) {
        int pos = static_cast<int>(2 + i);

        if (redis::KeyAtPosWithFlags != nullptr) {
            redis::KeyAtPosWithFlags(ctx, pos,
                                     redis::kKeyReadWrite | redis::kKeyAccess
                                         | redis::kKeyUpdate);
        } else {
            redis::KeyAtPos(ctx, pos);
        }
    }
}

// Redis time as the script reads it, from TIME (gettimeofday(), the clock
// of Redis's mstime()): in milliseconds and in microseconds.
void redis_time(double *ms, double *us)
{
    timeval tv;
    gettimeofday(&tv, nullptr);
    double sec = static_cast<double>(tv.tv_sec);
    double usec = static_cast<double>(tv.tv_usec);
    *ms = sec * 1000 + std::floor(usec / 1000);
    *us = sec * 1000000 + usec;
}

int send_reply(redis::Ctx *ctx, const std::vector<ReplyElement> &reply)
{
    redis::ReplyWithArray(ctx, static_cast<long>(reply.size()));

    for (const ReplyElement &element : reply) {
        if (element.error != nullptr) {
            redis::ReplyWithError(ctx, element.error);
        } else {
            redis::ReplyWithLongLong(ctx, lua::to_integer(element.value));
        }
    }

    return redis::kOk;
}

}  // namespace

int decide_command(redis::Ctx *ctx, redis::String **argv, int argc) noexcept
{
    if (redis::IsKeysPositionRequest(ctx)) {
        declare_keys(ctx, argv, argc);
        return redis::kOk;
    }

    if (argc < 3) {
        return redis::WrongArity(ctx);
    }

    try {
        // Reused by every call: Redis runs commands one at a time.
        static BatchCall call;
        double now_ms, now_us;
        redis_time(&now_ms, &now_us);

        if (const char *error = call.parse(argv, argc, now_ms, now_us)) {
            return redis::ReplyWithError(ctx, error);
        }

        // As Redis notes for a script when it starts (see redis_store.hpp).
        bool out_of_memory = (redis::GetContextFlags(ctx)
                              & redis::kCtxOutOfMemory) != 0;
        RedisStore store(ctx, call.keys, out_of_memory,
                         writes_propagate(ctx));
        BatchDecider decider(call, &store);
        decider.run();
        return send_reply(ctx, decider.reply());
    } catch (...) {
        return redis::ReplyWithError(ctx, "ERR ratelimit: out of memory");
    }
}

}  // namespace ratelimit
