// A candidate layout's command, for measurement only (bench/layouts/
// cost.pl; not the Redis module): PROTO.DECIDE limit bucket_ms span kind
// key..., a counted request of one zone per key, decided as the window
// script's fast path decides it, on the packed string of
// packed.lua, read and changed in place through StringDMA: no object
// per field.  Its reply is the script's (now, then per key rejected,
// count, oldest bucket, over).  No slide, settle, lease or error path: the
// scenarios measured need none.
//
// Loaded with the argument "inplace", a new bucket grows the string in
// place (StringTruncate, which leaves the allocator's slack); without it,
// the string is made anew at its exact size.
#include <sys/time.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "api/redis_module_api.hpp"

namespace {

using namespace ratelimit;

char *(*StringDMA)(redis::Key *key, std::size_t *len, int mode);
int (*StringTruncate)(redis::Key *key, std::size_t len);
int (*StringSet)(redis::Key *key, redis::String *str);
bool grow_in_place = false;

constexpr int kKeyEmpty = 0;
constexpr std::size_t kHead = 9;   // B width, I8 base bucket
constexpr std::size_t kTotal = 8;  // I8 total, last

// Little-endian integers of `width` bytes (the host's order: x86-64).
std::uint64_t get(const char *at, std::size_t width)
{
    std::uint64_t value = 0;
    std::memcpy(&value, at, width);
    return value;
}

void put(char *at, std::uint64_t value, std::size_t width)
{
    std::memcpy(at, &value, width);
}

struct Zone {
    double limit, bucket, span;
    bool fixed;
    long long expire_ms;
};

// out: rejected, count, oldest, over.
void answer(long long *out, bool over, std::uint64_t count,
            std::uint64_t oldest)
{
    out[0] = over;
    out[1] = static_cast<long long>(count);
    out[2] = static_cast<long long>(oldest);
    out[3] = over;
}

// A fixed window: I8 window number, I8 count.
void decide_fixed(redis::Key *key, const Zone &z, long long *out)
{
    std::size_t len;
    std::uint64_t window = 0, count = 0;
    auto bucket = static_cast<std::uint64_t>(z.bucket);

    if (redis::KeyType(key) != kKeyEmpty) {
        char *p = StringDMA(key, &len, redis::kWrite);
        window = get(p, 8);
        count = get(p + 8, 8);
    } else {
        StringTruncate(key, 16);
    }

    if (window != bucket) {
        count = 0;
    }

    if (1 > z.limit - static_cast<double>(count)) {
        answer(out, true, count, bucket);
        return;
    }

    char *p = StringDMA(key, &len, redis::kWrite);
    put(p, bucket, 8);
    put(p + 8, count + 1, 8);

    if (window != bucket) {
        redis::SetAbsExpire(key, z.expire_ms);
    }

    answer(out, false, count + 1, bucket);
}

// A new bucket's entry and the total appended where the total was.
void append_bucket(redis::Ctx *ctx, redis::Key *key, char *p,
                   std::size_t len, std::uint64_t entry_id,
                   std::size_t width, std::uint64_t total)
{
    std::size_t grown_len = len + 2 + width;
    char tail[2 + 8 + kTotal];
    put(tail, entry_id, 2);
    put(tail + 2, 1, width);
    put(tail + 2 + width, total, kTotal);

    if (grow_in_place) {
        StringTruncate(key, grown_len);
        p = StringDMA(key, &len, redis::kWrite);
        std::memcpy(p + grown_len - (2 + width + kTotal), tail,
                    2 + width + kTotal);
        return;
    }

    char made[4096];
    std::memcpy(made, p, len - kTotal);
    std::memcpy(made + len - kTotal, tail, 2 + width + kTotal);
    redis::String *str = redis::CreateString(ctx, made, grown_len);
    StringSet(key, str);
    redis::FreeString(ctx, str);
}

// A sliding window: B width w, I8 base bucket, per live bucket I2 (id -
// base) and I<w> count, I8 total.
void decide_sliding(redis::Ctx *ctx, redis::Key *key, const Zone &z,
                    long long *out)
{
    std::size_t len;
    auto bucket = static_cast<std::uint64_t>(z.bucket);

    if (redis::KeyType(key) == kKeyEmpty) {
        StringTruncate(key, kHead + 3 + kTotal);
        char *p = StringDMA(key, &len, redis::kWrite);
        p[0] = 1;
        put(p + 1, bucket, 8);
        put(p + kHead, 0, 2);
        p[kHead + 2] = 1;
        put(p + kHead + 3, 1, kTotal);
        redis::SetAbsExpire(key, z.expire_ms);
        answer(out, false, 1, bucket);
        return;
    }

    char *p = StringDMA(key, &len, redis::kWrite);
    std::size_t width = static_cast<unsigned char>(p[0]);
    std::uint64_t base = get(p + 1, 8), total = get(p + len - kTotal, 8);
    std::size_t last = len - kTotal - width - 2;
    std::uint64_t newest = base + get(p + last, 2);
    std::uint64_t here = get(p + last + 2, width);
    std::uint64_t oldest = base + get(p + kHead, 2);

    if (1 > z.limit - static_cast<double>(total)) {
        answer(out, true, total, oldest);
        return;
    }

    if (newest == bucket) {
        put(p + last + 2, here + 1, width);
        put(p + len - kTotal, total + 1, kTotal);
    } else {
        append_bucket(ctx, key, p, len, bucket - base, width, total + 1);
        redis::SetAbsExpire(key, z.expire_ms);
    }

    answer(out, false, total + 1, oldest);
}

double number(redis::String *str)
{
    std::size_t len;
    return std::strtod(redis::StringPtrLen(str, &len), nullptr);
}

int decide(redis::Ctx *ctx, redis::String **argv, int argc) noexcept
{
    if (argc < 6) {
        return redis::WrongArity(ctx);
    }

    timeval tv;
    gettimeofday(&tv, nullptr);
    double now = static_cast<double>(tv.tv_sec) * 1000
                 + std::floor(static_cast<double>(tv.tv_usec) / 1000);
    std::size_t len;
    Zone z;
    z.limit = number(argv[1]);
    double bucket_ms = number(argv[2]);
    z.span = number(argv[3]);
    z.fixed = redis::StringPtrLen(argv[4], &len)[0] == 'f';
    z.bucket = std::floor(now / bucket_ms);
    z.expire_ms = static_cast<long long>((z.bucket + z.span) * bucket_ms);

    redis::ReplyWithArray(ctx, 1 + 4 * (argc - 5));
    redis::ReplyWithLongLong(ctx, static_cast<long long>(now));

    for (int i = 5; i < argc; i++) {
        long long out[4];
        redis::Key *key = redis::OpenKey(ctx, argv[i], redis::kWrite);

        if (z.fixed) {
            decide_fixed(key, z, out);
        } else {
            decide_sliding(ctx, key, z, out);
        }

        redis::CloseKey(key);

        for (long long value : out) {
            redis::ReplyWithLongLong(ctx, value);
        }
    }

    return redis::kOk;
}

}  // namespace

extern "C" int RedisModule_OnLoad(redis::Ctx *ctx, redis::String **argv,
                                  int argc)
{
    std::size_t len;

    if (!redis::load_api(ctx)
        || redis::GetApi("RedisModule_StringDMA",
                         reinterpret_cast<void *>(&StringDMA)) != redis::kOk
        || redis::GetApi("RedisModule_StringTruncate",
                         reinterpret_cast<void *>(&StringTruncate))
               != redis::kOk
        || redis::GetApi("RedisModule_StringSet",
                         reinterpret_cast<void *>(&StringSet)) != redis::kOk)
    {
        return redis::kErr;
    }

    grow_in_place = argc > 0
                    && std::strcmp(redis::StringPtrLen(argv[0], &len),
                                   "inplace") == 0;
    redis::SetModuleAttribs(ctx, "proto", 1, redis::kApiVersion1);
    return redis::CreateCommand(ctx, "proto.decide", decide, "write", 5, -1,
                                1);
}
