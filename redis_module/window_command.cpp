#include "window_command.hpp"

#include <sys/time.h>

#include <cmath>

#include "batch_call.hpp"
#include "batch_decider.hpp"
#include "hash_calls.hpp"
#include "propagation.hpp"

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

        // As Redis notes for a script when it starts (see hash_calls.hpp).
        bool out_of_memory = (redis::GetContextFlags(ctx)
                              & redis::kCtxOutOfMemory) != 0;
        HashCalls calls(ctx, out_of_memory, writes_propagate(ctx));
        BatchDecider decider(call, &calls);
        decider.run();
        return send_reply(ctx, decider.reply());
    } catch (...) {
        return redis::ReplyWithError(ctx, "ERR ratelimit: out of memory");
    }
}

}  // namespace ratelimit
