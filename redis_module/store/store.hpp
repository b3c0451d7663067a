// What the zone kinds read and write, and nothing of how: the Redis
// commands the window script makes through redis.call() on a call's keys
// (a window zone's hash, a GCRA zone's string), each with the effects and
// the errors the script's would have.  Redis's keyspace implements it
// (redis_store/); a map in memory does for the unit tests (test/).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/lua_number.hpp"

namespace ratelimit {

// An error the script's redis.call() would have raised, as Redis words it;
// nullptr for none.
using CallError = const char *;

inline constexpr char kWrongType[] =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
inline constexpr char kOutOfMemory[] =
    "OOM command not allowed when used memory > 'maxmemory'.";

// A key of the call, by its place among the call's keys (0 the first).
using KeyNumber = std::size_t;

// A field's value as HMGET answers it: absent (nil), or its bytes.
struct FieldValue {
    std::string_view text;
    bool found = false;

    bool present() const { return found; }
};

// tonumber() of a field: false for nil too.
inline bool field_number(const FieldValue &value, double *out)
{
    return value.found
           && lua::to_number(value.text.data(), value.text.size(), out);
}

// What a window zone's key holds, as the script's redis.pcall('GET')
// tells it: nothing (nil), a string (the packed layout: its bytes), or a
// hash (an error; so does a key of any other type, which the hash
// commands then answer with WRONGTYPE).
enum class KeyLayout { kNone, kPacked, kHash };

// A hash's fields and values, as HGETALL answers them.
using FieldPairs = std::vector<std::pair<std::string, std::string>>;

// The commands, as a request of a call makes them one after another (and
// the call its markers' EXISTS first, zones/batch_decider.hpp).  What
// a read answers stays valid until release(), the end of the request.
class Store {
public:
    // HMGET key field...: out[i] for fields[i].
    virtual CallError hmget(KeyNumber key, const char *const *fields,
                            std::size_t count, FieldValue *out) = 0;

    // HGETALL key.
    virtual CallError hgetall(KeyNumber key, FieldPairs *out) = 0;

    // HSET key field value ..., `pairs` fields each followed by its
    // value.
    virtual CallError hset(KeyNumber key, const char *const *fields_values,
                           std::size_t pairs) = 0;

    virtual CallError hdel(KeyNumber key, const std::string *fields,
                           std::size_t count) = 0;

    virtual CallError del(KeyNumber key) = 0;

    // PEXPIREAT key at_ms, the time as the decimal text the script sends.
    virtual CallError pexpireat(KeyNumber key, const char *at_ms) = 0;

    // GET key (a GCRA zone's string): out absent for no key.
    virtual CallError get(KeyNumber key, FieldValue *out) = 0;

    // SET key value PXAT at_ms, both as the decimal text the script sends.
    virtual CallError set_pxat(KeyNumber key, const char *value,
                               const char *at_ms) = 0;

    // GET key as a window zone reads it: what the key holds, and a
    // string's bytes into `bytes`, valid until the key is written.
    virtual KeyLayout read_layout(KeyNumber key, std::string_view *bytes) = 0;

    // SETRANGE key offset bytes: a string's bytes from `offset` changed in
    // place, its length and expiry time kept.
    virtual CallError setrange(KeyNumber key, std::size_t offset,
                               std::string_view bytes) = 0;

    // SET key bytes PXAT at_ms: the string made anew at its exact size,
    // whatever the key held.
    virtual CallError set_bytes(KeyNumber key, std::string_view bytes,
                                const char *at_ms) = 0;

    // The name of the call's key `key`, valid for the whole call.
    virtual std::string_view key_name(KeyNumber key) = 0;

    // EXISTS key: whether it holds a value, of any type.
    virtual bool exists(KeyNumber key) = 0;

    // GET of a key the call does not name (a side key, made from one it
    // does), as the script's redis.pcall() answers it: a string's bytes,
    // else absent (no key; another type, whose error the script drops).
    virtual void get_named(std::string_view name, FieldValue *out) = 0;

    // A ban's writes (the script's ban_subject()), on a key the call does
    // not name (a side key) and on a marker.  PTTL name: ms left, -1 for
    // no expiry, -2 for no key.
    virtual double pttl_named(std::string_view name) = 0;

    // SET name value [PXAT at_ms] (at_ms nullptr: none), as redis.call()
    // makes it, whatever the key held.
    virtual CallError set_named(std::string_view name, std::string_view value,
                                const char *at_ms) = 0;

    // Marker `marker` given member `member` of score `score` (decimal, or
    // "+inf") and kept as the script keeps it, each command as
    // redis.pcall() makes it (a marker of another type changes nothing):
    // ZADD, ZREMRANGEBYSCORE -inf now_ms, then its expiry its top score's
    // (PERSIST for +inf, else PEXPIREAT).
    virtual void mark(KeyNumber marker, std::string_view member,
                      const char *score, const char *now_ms) = 0;

    // The end of a request: what its reads answered may go.
    virtual void release() noexcept = 0;

protected:
    ~Store() = default;
};

}  // namespace ratelimit
