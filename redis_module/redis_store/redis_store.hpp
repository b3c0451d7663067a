// The store (store/store.hpp) in Redis's keyspace, through the module API:
// the commands the window script makes through redis.call(), made on keys
// directly with the same effects: the same hash fields, expiry times,
// errors, replication (each write sent to replicas and the AOF as the
// command the script would have run, all of a call in one MULTI/EXEC, and
// not built at all where Redis would drop it: command/propagation.hpp) and
// keyspace notifications.  A window's packed string is read and changed
// in place (StringDMA), no object per field.  And the script's rule for
// out of memory: a command that may grow memory (HSET, SET, SETRANGE) is
// refused with OOM when Redis was over maxmemory as the call began, until
// the call has issued any write command; after that nothing is refused, so
// that no call stops halfway.
#pragma once

#include <cstddef>
#include <vector>

#include "api/redis_module_api.hpp"
#include "store/store.hpp"

namespace ratelimit {

class RedisStore final : public Store {
public:
    // `keys`: the call's keys, by KeyNumber.  `propagate`: whether writes
    // reach the AOF or a replica (writes_propagate()); if not, none is
    // replicated.
    RedisStore(redis::Ctx *ctx, redis::String *const *keys,
               bool out_of_memory, bool propagate) noexcept
        : ctx_(ctx), keys_(keys), out_of_memory_(out_of_memory),
          propagate_(propagate) {}

    ~RedisStore();

    RedisStore(const RedisStore &) = delete;
    RedisStore &operator=(const RedisStore &) = delete;

    CallError hmget(KeyNumber key, const char *const *fields,
                    std::size_t count, FieldValue *out) override;
    CallError hgetall(KeyNumber key, FieldPairs *out) override;
    CallError hset(KeyNumber key, const char *const *fields_values,
                   std::size_t pairs) override;
    CallError hdel(KeyNumber key, const std::string *fields,
                   std::size_t count) override;
    CallError del(KeyNumber key) override;
    CallError pexpireat(KeyNumber key, const char *at_ms) override;
    CallError get(KeyNumber key, FieldValue *out) override;
    CallError set_pxat(KeyNumber key, const char *value,
                       const char *at_ms) override;
    KeyLayout read_layout(KeyNumber key, std::string_view *bytes) override;
    CallError setrange(KeyNumber key, std::size_t offset,
                       std::string_view bytes) override;
    CallError set_bytes(KeyNumber key, std::string_view bytes,
                        const char *at_ms) override;
    std::string_view key_name(KeyNumber key) override;
    bool exists(KeyNumber key) override;
    void get_named(std::string_view name, FieldValue *out) override;
    double pttl_named(std::string_view name) override;
    CallError set_named(std::string_view name, std::string_view value,
                        const char *at_ms) override;
    void mark(KeyNumber marker, std::string_view member, const char *score,
              const char *now_ms) override;

    // Frees the values the reads answered and closes the key.
    void release() noexcept override;

private:
    CallError may_write(bool may_grow_memory);
    bool take_string(RedisModuleCallReply *reply, FieldValue *out);
    redis::Key *open(KeyNumber key);
    void close() noexcept;
    redis::String *field(const char *name);
    redis::String *value(const char *text);

    // The keyspace notification `event` of class `type` on `key`.
    void notify(int type, const char *event, KeyNumber key) noexcept
    {
        redis::NotifyKeyspaceEvent(ctx_, type, event, keys_[key]);
    }

    // Replicates a write as `command` would have made it, unless nothing
    // listens (propagate_).
    template <typename... Args>
    void replicate(const char *command, const char *format,
                   Args... args) noexcept
    {
        if (propagate_) {
            redis::Replicate(ctx_, command, format, args...);
        }
    }

    redis::Ctx *ctx_;
    redis::String *const *keys_;
    bool out_of_memory_;
    bool propagate_;
    bool wrote_ = false;  // a write command has been issued

    // One key is open at a time, kept from one command of a request to the
    // next on it: a second handle on a key one of them deletes would point
    // at freed memory.
    redis::Key *key_ = nullptr;
    KeyNumber key_number_ = 0;

    // Field names made once per call ("t", "o", "n", the zones' current
    // buckets), for as long as the call runs; values and other names for
    // as long as the request does.  Looked up for every field a request
    // reads or writes: a plain array, compared byte by byte.
    struct Name {
        char text[lua::kMaxText];
        redis::String *made;
    };

    static constexpr std::size_t kMostNames = 16;

    Name names_[kMostNames];
    std::size_t name_count_ = 0;
    std::vector<redis::String *> made_;
    std::vector<redis::String *> pairs_;  // an HSET's fields and values
};

}  // namespace ratelimit
