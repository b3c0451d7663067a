#include "hash_calls.hpp"

#include <cstring>

namespace ratelimit {

const char kWrongType[] =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
const char kOutOfMemory[] =
    "OOM command not allowed when used memory > 'maxmemory'.";

namespace {

// A key opened for one command, closed after it.
class OpenKey {
public:
    OpenKey(redis::Ctx *ctx, redis::String *name, int mode)
        : key_(redis::OpenKey(ctx, name, mode)) {}

    ~OpenKey() { redis::CloseKey(key_); }

    OpenKey(const OpenKey &) = delete;
    OpenKey &operator=(const OpenKey &) = delete;

    redis::Key *get() const { return key_; }

    // Holds a hash, or nothing (a read of a missing key finds no key).
    bool empty() const
    {
        return key_ == nullptr || redis::KeyType(key_) == redis::kKeyEmpty;
    }

    bool wrong_type() const
    {
        return !empty() && redis::KeyType(key_) != redis::kKeyHash;
    }

private:
    redis::Key *key_;
};

void collect_pair(redis::Key *, redis::String *field, redis::String *value,
                  void *data)
{
    auto *out = static_cast<std::vector<std::pair<std::string, std::string>>
                                *>(data);
    std::size_t flen, vlen;
    const char *f = redis::StringPtrLen(field, &flen);
    const char *v = redis::StringPtrLen(value, &vlen);
    out->emplace_back(std::string(f, flen), std::string(v, vlen));
}

// The argument strings of one command, freed with it.
class Strings {
public:
    explicit Strings(redis::Ctx *ctx) : ctx_(ctx) {}

    ~Strings()
    {
        for (redis::String *s : all_) {
            redis::FreeString(ctx_, s);
        }
    }

    Strings(const Strings &) = delete;
    Strings &operator=(const Strings &) = delete;

    redis::String *add(std::string_view bytes)
    {
        all_.push_back(redis::CreateString(ctx_, bytes.data(),
                                           bytes.size()));
        return all_.back();
    }

    redis::String **data() { return all_.data(); }
    std::size_t size() const { return all_.size(); }

private:
    redis::Ctx *ctx_;
    std::vector<redis::String *> all_;
};

}  // namespace

// As the script's redis.call() checks a write command (Redis 7.0, script.c):
// the OOM check applies to commands flagged deny-oom, and any write command
// that passes it counts as written, whether it then changes anything or
// fails.
CallError HashCalls::may_write(bool may_grow_memory)
{
    if (may_grow_memory && out_of_memory_ && !wrote_) {
        return kOutOfMemory;
    }

    wrote_ = true;
    return nullptr;
}

CallError HashCalls::hmget(redis::String *key, const char *const *fields,
                           std::size_t count, FieldValue *out)
{
    OpenKey open(ctx_, key, redis::kRead);

    if (open.wrong_type()) {
        return kWrongType;
    }

    for (std::size_t i = 0; i < count; i++) {
        out[i] = FieldValue{};

        if (open.empty()) {
            continue;
        }

        redis::String *value = nullptr;
        redis::HashGet(open.get(), redis::kHashCFields, fields[i], &value,
                       nullptr);

        if (value != nullptr) {
            answered_.push_back(value);
            std::size_t len;
            const char *bytes = redis::StringPtrLen(value, &len);
            out[i] = FieldValue{value, {bytes, len}};
        }
    }

    return nullptr;
}

CallError HashCalls::hgetall(
    redis::String *key, std::vector<std::pair<std::string, std::string>> *out)
{
    out->clear();
    OpenKey open(ctx_, key, redis::kRead);

    if (open.wrong_type()) {
        return kWrongType;
    }

    if (open.empty()) {
        return nullptr;
    }

    RedisModuleScanCursor *cursor = redis::ScanCursorCreate();

    while (redis::ScanKey(open.get(), cursor, collect_pair, out)) {
    }

    redis::ScanCursorDestroy(cursor);
    return nullptr;
}

CallError HashCalls::hset(redis::String *key,
                          const char *const *fields_values, std::size_t pairs)
{
    if (CallError error = may_write(true)) {
        return error;
    }

    OpenKey open(ctx_, key, redis::kWrite);

    if (open.wrong_type()) {
        return kWrongType;
    }

    Strings args(ctx_);

    for (std::size_t i = 0; i < 2 * pairs; i++) {
        args.add(fields_values[i]);
    }

    for (std::size_t i = 0; i + 1 < args.size(); i += 2) {
        redis::HashSet(open.get(), 0, args.data()[i], args.data()[i + 1],
                       nullptr);
    }

    redis::Replicate(ctx_, "HSET", "sv", key, args.data(), args.size());
    redis::NotifyKeyspaceEvent(ctx_, redis::kNotifyHash, "hset", key);
    return nullptr;
}

CallError HashCalls::hdel(redis::String *key, const std::string *fields,
                          std::size_t count)
{
    may_write(false);
    OpenKey open(ctx_, key, redis::kWrite);

    if (open.wrong_type()) {
        return kWrongType;
    }

    if (open.empty()) {
        return nullptr;
    }

    Strings args(ctx_);
    int deleted = 0;

    for (std::size_t i = 0; i < count; i++) {
        deleted += redis::HashSet(open.get(), 0, args.add(fields[i]),
                                  redis::kHashDelete, nullptr);
    }

    if (deleted == 0) {
        return nullptr;
    }

    redis::Replicate(ctx_, "HDEL", "sv", key, args.data(), args.size());
    redis::NotifyKeyspaceEvent(ctx_, redis::kNotifyHash, "hdel", key);

    if (open.empty()) {
        redis::NotifyKeyspaceEvent(ctx_, redis::kNotifyGeneric, "del", key);
    }

    return nullptr;
}

CallError HashCalls::del(redis::String *key)
{
    may_write(false);
    OpenKey open(ctx_, key, redis::kWrite);

    if (!open.empty()) {
        redis::DeleteKey(open.get());
        redis::Replicate(ctx_, "DEL", "s", key);
        redis::NotifyKeyspaceEvent(ctx_, redis::kNotifyGeneric, "del", key);
    }

    return nullptr;
}

CallError HashCalls::pexpireat(redis::String *key, const char *at_ms)
{
    may_write(false);
    OpenKey open(ctx_, key, redis::kWrite);

    if (open.empty()) {
        return nullptr;
    }

    redis::SetAbsExpire(open.get(), std::strtoll(at_ms, nullptr, 10));
    redis::Replicate(ctx_, "PEXPIREAT", "sc", key, at_ms);
    redis::NotifyKeyspaceEvent(ctx_, redis::kNotifyGeneric, "expire", key);
    return nullptr;
}

void HashCalls::release() noexcept
{
    for (redis::String *value : answered_) {
        redis::FreeString(ctx_, value);
    }

    answered_.clear();
}

}  // namespace ratelimit
