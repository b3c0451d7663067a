// The Redis commands the window script makes through redis.call() (on the
// hashes of window zones, and GET and SET on a GCRA zone's string), made on
// keys directly with the same effects: the same hash fields, expiry times,
// errors, replication (each write sent to replicas and the AOF as the
// command the script would have run, all of a call in one MULTI/EXEC, and
// not built at all where Redis would drop it: propagation.hpp) and
// keyspace notifications.  And the script's rule for out of memory: a
// command that may grow memory (HSET) is refused with OOM when Redis was
// over maxmemory as the call began, until the call has issued any write
// command; after that nothing is refused, so that no call stops halfway.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lua_number.hpp"
#include "redis_module_api.hpp"

namespace ratelimit {

// An error the script's redis.call() would have raised, as Redis words it;
// nullptr for none.
using CallError = const char *;

extern const char kWrongType[];
extern const char kOutOfMemory[];

// A field's value as HMGET answers it: absent (nil), or its bytes.
struct FieldValue {
    redis::String *str = nullptr;
    std::string_view text;

    bool present() const { return str != nullptr; }
};

class HashCalls {
public:
    // `propagate`: whether writes reach the AOF or a replica
    // (writes_propagate()); if not, none is replicated.
    HashCalls(redis::Ctx *ctx, bool out_of_memory, bool propagate) noexcept
        : ctx_(ctx), out_of_memory_(out_of_memory), propagate_(propagate) {}

    ~HashCalls();

    HashCalls(const HashCalls &) = delete;
    HashCalls &operator=(const HashCalls &) = delete;

    // HMGET key field...: out[i] for fields[i], valid until release().
    CallError hmget(redis::String *key, const char *const *fields,
                    std::size_t count, FieldValue *out);

    // HGETALL key, as (field, value) pairs.
    CallError hgetall(redis::String *key,
                      std::vector<std::pair<std::string, std::string>> *out);

    // HSET key field value ..., `pairs` fields each followed by its value.
    CallError hset(redis::String *key, const char *const *fields_values,
                   std::size_t pairs);

    CallError hdel(redis::String *key, const std::string *fields,
                   std::size_t count);

    CallError del(redis::String *key);

    // PEXPIREAT key at_ms, the time as the decimal text the script sends.
    CallError pexpireat(redis::String *key, const char *at_ms);

    // GET key (a GCRA zone's string): out absent for no key, valid until
    // release().
    CallError get(redis::String *key, FieldValue *out);

    // SET key value PXAT at_ms, both as the decimal text the script sends.
    CallError set_pxat(redis::String *key, const char *value,
                       const char *at_ms);

    // Frees the values hmget() answered and closes the key: the end of a
    // request.
    void release() noexcept;

private:
    CallError may_write(bool may_grow_memory);
    redis::Key *open(redis::String *name);
    void close() noexcept;
    redis::String *field(const char *name);
    redis::String *value(const char *text);

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
    bool out_of_memory_;
    bool propagate_;
    bool wrote_ = false;  // a write command has been issued

    // One key is open at a time, kept from one command of a request to the
    // next on it: a second handle on a key one of them deletes would point
    // at freed memory.
    redis::Key *key_ = nullptr;
    redis::String *key_name_ = nullptr;

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
};

}  // namespace ratelimit
