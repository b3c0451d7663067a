#include "redis_store/redis_store.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace ratelimit {

namespace {

// The most pairs one HashSet call sets: the request's own HSETs (a
// window written whole sets more, in several calls).
constexpr std::size_t kMostPairs = 4;

bool holds_hash_or_nothing(redis::Key *key)
{
    int type = redis::KeyType(key);
    return type == redis::kKeyEmpty || type == redis::kKeyHash;
}

// Field names are short and mostly differ in their first byte: cheaper
// than strcmp()'s call.
bool same_text(const char *a, const char *b)
{
    while (*a == *b) {
        if (*a == '\0') {
            return true;
        }

        a++;
        b++;
    }

    return false;
}

// The fields set one after another, as HSET does, up to kMostPairs in one
// HashSet call: Redis's work per call (type checks, deleting a key left
// empty) done once.
void set_pairs(redis::Key *key, redis::String *const *a, std::size_t pairs)
{
    switch (pairs) {
    case 1:
        redis::HashSet(key, 0, a[0], a[1], nullptr);
        break;
    case 2:
        redis::HashSet(key, 0, a[0], a[1], a[2], a[3], nullptr);
        break;
    case 3:
        redis::HashSet(key, 0, a[0], a[1], a[2], a[3], a[4], a[5], nullptr);
        break;
    default:
        redis::HashSet(key, 0, a[0], a[1], a[2], a[3], a[4], a[5], a[6],
                       a[7], nullptr);
    }
}

void collect_pair(redis::Key *, redis::String *field, redis::String *value,
                  void *data)
{
    auto *out = static_cast<FieldPairs *>(data);
    std::size_t flen, vlen;
    const char *f = redis::StringPtrLen(field, &flen);
    const char *v = redis::StringPtrLen(value, &vlen);
    out->emplace_back(std::string(f, flen), std::string(v, vlen));
}

// A reply freed unread (the script's redis.pcall() whose answer it drops).
void drop_reply(RedisModuleCallReply *reply)
{
    if (reply != nullptr) {
        redis::FreeCallReply(reply);
    }
}

}  // namespace

RedisStore::~RedisStore()
{
    release();

    for (std::size_t i = 0; i < name_count_; i++) {
        redis::FreeString(ctx_, names_[i].made);
    }
}

// As the script's redis.call() checks a write command (Redis 7.0, script.c):
// the OOM check applies to commands flagged deny-oom, and any write command
// that passes it counts as written, whether it then changes anything or
// fails.
CallError RedisStore::may_write(bool may_grow_memory)
{
    if (may_grow_memory && out_of_memory_ && !wrote_) {
        return kOutOfMemory;
    }

    wrote_ = true;
    return nullptr;
}

// Opened for writing, reads included: Redis's read and write lookups differ
// only on a replica, where the command (flagged "write") never runs.
redis::Key *RedisStore::open(KeyNumber key)
{
    if (key_ == nullptr || key_number_ != key) {
        close();
        key_ = redis::OpenKey(ctx_, keys_[key], redis::kWrite);
        key_number_ = key;
    }

    return key_;
}

void RedisStore::close() noexcept
{
    if (key_ != nullptr) {
        redis::CloseKey(key_);
        key_ = nullptr;
    }
}

redis::String *RedisStore::field(const char *name)
{
    for (std::size_t i = 0; i < name_count_; i++) {
        if (same_text(names_[i].text, name)) {
            return names_[i].made;
        }
    }

    std::size_t len = std::strlen(name);
    redis::String *made = redis::CreateString(ctx_, name, len);

    if (name_count_ < kMostNames && len < lua::kMaxText) {
        std::memcpy(names_[name_count_].text, name, len + 1);
        names_[name_count_++].made = made;
    } else {
        made_.push_back(made);
    }

    return made;
}

redis::String *RedisStore::value(const char *text)
{
    made_.push_back(redis::CreateString(ctx_, text, std::strlen(text)));
    return made_.back();
}

CallError RedisStore::hmget(KeyNumber key, const char *const *fields,
                           std::size_t count, FieldValue *out)
{
    redis::Key *open_key = open(key);

    if (!holds_hash_or_nothing(open_key)) {
        return kWrongType;
    }

    bool empty = redis::KeyType(open_key) == redis::kKeyEmpty;

    for (std::size_t i = 0; i < count; i++) {
        out[i] = FieldValue{};
        redis::String *value = nullptr;

        if (!empty) {
            redis::HashGet(open_key, 0, field(fields[i]), &value, nullptr);
        }

        if (value != nullptr) {
            made_.push_back(value);
            std::size_t len;
            const char *bytes = redis::StringPtrLen(value, &len);
            out[i] = FieldValue{{bytes, len}, true};
        }
    }

    return nullptr;
}

CallError RedisStore::hgetall(KeyNumber key, FieldPairs *out)
{
    out->clear();
    redis::Key *open_key = open(key);

    if (!holds_hash_or_nothing(open_key)) {
        return kWrongType;
    }

    if (redis::KeyType(open_key) == redis::kKeyEmpty) {
        return nullptr;
    }

    RedisModuleScanCursor *cursor = redis::ScanCursorCreate();

    while (redis::ScanKey(open_key, cursor, collect_pair, out)) {
    }

    redis::ScanCursorDestroy(cursor);
    return nullptr;
}

CallError RedisStore::hset(KeyNumber key,
                          const char *const *fields_values, std::size_t pairs)
{
    if (CallError error = may_write(true)) {
        return error;
    }

    redis::Key *open_key = open(key);

    if (!holds_hash_or_nothing(open_key)) {
        return kWrongType;
    }

    pairs_.clear();

    for (std::size_t i = 0; i < 2 * pairs; i += 2) {
        pairs_.push_back(field(fields_values[i]));
        pairs_.push_back(value(fields_values[i + 1]));
    }

    for (std::size_t i = 0; i < pairs; i += kMostPairs) {
        set_pairs(open_key, pairs_.data() + 2 * i,
                  std::min(kMostPairs, pairs - i));
    }

    replicate("HSET", "sv", keys_[key], pairs_.data(), pairs_.size());
    notify(redis::kNotifyHash, "hset", key);
    return nullptr;
}

CallError RedisStore::hdel(KeyNumber key, const std::string *fields,
                          std::size_t count)
{
    may_write(false);
    redis::Key *open_key = open(key);

    if (!holds_hash_or_nothing(open_key)) {
        return kWrongType;
    }

    if (redis::KeyType(open_key) == redis::kKeyEmpty) {
        return nullptr;
    }

    std::size_t first = made_.size();
    int deleted = 0;

    for (std::size_t i = 0; i < count; i++) {
        made_.push_back(redis::CreateString(ctx_, fields[i].data(),
                                            fields[i].size()));
        deleted += redis::HashSet(open_key, 0, made_.back(),
                                  redis::kHashDelete, nullptr);
    }

    if (deleted == 0) {
        return nullptr;
    }

    replicate("HDEL", "sv", keys_[key], made_.data() + first, count);
    notify(redis::kNotifyHash, "hdel", key);

    if (redis::KeyType(open_key) == redis::kKeyEmpty) {
        notify(redis::kNotifyGeneric, "del", key);
    }

    return nullptr;
}

CallError RedisStore::del(KeyNumber key)
{
    may_write(false);
    redis::Key *open_key = open(key);

    if (redis::KeyType(open_key) != redis::kKeyEmpty) {
        redis::DeleteKey(open_key);
        replicate("DEL", "s", keys_[key]);
        notify(redis::kNotifyGeneric, "del", key);
    }

    return nullptr;
}

CallError RedisStore::pexpireat(KeyNumber key, const char *at_ms)
{
    may_write(false);
    redis::Key *open_key = open(key);

    if (redis::KeyType(open_key) == redis::kKeyEmpty) {
        return nullptr;
    }

    redis::SetAbsExpire(open_key, std::strtoll(at_ms, nullptr, 10));
    replicate("PEXPIREAT", "sc", keys_[key], at_ms);
    notify(redis::kNotifyGeneric, "expire", key);
    return nullptr;
}

// GET itself, as for SET below: reading the value through the key would
// turn the integer SET stored into a string (32 bytes more a subject).
CallError RedisStore::get(KeyNumber key, FieldValue *out)
{
    close();
    return take_string(redis::Call(ctx_, "GET", "s", keys_[key]), out)
               ? nullptr
               : kWrongType;
}

// GET's reply, freed: a string's bytes into `out`, kept until release(),
// else absent.  False if it was neither a string nor nil (an error).
bool RedisStore::take_string(RedisModuleCallReply *reply, FieldValue *out)
{
    *out = FieldValue{};
    int type = reply != nullptr ? redis::CallReplyType(reply)
                                : redis::kReplyNull;

    if (type == redis::kReplyString) {
        std::size_t len;
        const char *bytes = redis::CallReplyStringPtr(reply, &len);
        made_.push_back(redis::CreateString(ctx_, bytes, len));
        bytes = redis::StringPtrLen(made_.back(), &len);
        *out = FieldValue{{bytes, len}, true};
    }

    if (reply != nullptr) {
        redis::FreeCallReply(reply);
    }

    return type == redis::kReplyString || type == redis::kReplyNull;
}

// SET itself, called as the script calls it, on the key closed: it stores
// a number as an integer object, as SET does (a string set through the key
// takes 32 bytes more), and replicates and notifies as SET.  The value
// goes as text: a fresh object, which SET may encode.  "!" replicates it,
// where anything listens.
CallError RedisStore::set_pxat(KeyNumber key, const char *value_text,
                              const char *at_ms)
{
    if (CallError error = may_write(true)) {
        return error;
    }

    close();
    RedisModuleCallReply *reply =
        redis::Call(ctx_, "SET", propagate_ ? "!sccc" : "sccc", keys_[key],
                    value_text, "PXAT", at_ms);

    if (reply != nullptr) {
        redis::FreeCallReply(reply);
    }

    return nullptr;
}

// A string's bytes read where they are: the command's own read of a window
// zone's key, with no object made.
KeyLayout RedisStore::read_layout(KeyNumber key, std::string_view *bytes)
{
    redis::Key *open_key = open(key);
    int type = redis::KeyType(open_key);
    *bytes = {};

    if (type == redis::kKeyEmpty) {
        return KeyLayout::kNone;
    }

    if (type != redis::kKeyString) {
        return KeyLayout::kHash;
    }

    std::size_t len;
    const char *at = redis::StringDMA(open_key, &len, redis::kRead);
    *bytes = {at, len};
    return KeyLayout::kPacked;
}

CallError RedisStore::setrange(KeyNumber key, std::size_t offset,
                               std::string_view bytes)
{
    if (CallError error = may_write(true)) {
        return error;
    }

    std::size_t len;
    redis::Key *open_key = open(key);
    char *at = redis::StringDMA(open_key, &len, redis::kWrite);
    std::memcpy(at + offset, bytes.data(), bytes.size());
    replicate("SETRANGE", "slb", keys_[key], static_cast<long long>(offset),
              bytes.data(), bytes.size());
    notify(redis::kNotifyString, "setrange", key);
    return nullptr;
}

// Made at its exact size: a string StringTruncate makes on an empty key
// has no slack, where one grown in place keeps the allocator's.
CallError RedisStore::set_bytes(KeyNumber key, std::string_view bytes,
                                const char *at_ms)
{
    if (CallError error = may_write(true)) {
        return error;
    }

    std::size_t len;
    redis::Key *open_key = open(key);

    if (redis::KeyType(open_key) != redis::kKeyEmpty) {
        redis::DeleteKey(open_key);
    }

    redis::StringTruncate(open_key, bytes.size());
    char *at = redis::StringDMA(open_key, &len, redis::kWrite);
    std::memcpy(at, bytes.data(), bytes.size());
    redis::SetAbsExpire(open_key, std::strtoll(at_ms, nullptr, 10));
    replicate("SET", "sbcc", keys_[key], bytes.data(), bytes.size(), "PXAT",
              at_ms);
    notify(redis::kNotifyString, "set", key);
    notify(redis::kNotifyGeneric, "expire", key);
    return nullptr;
}

std::string_view RedisStore::key_name(KeyNumber key)
{
    std::size_t len;
    const char *bytes = redis::StringPtrLen(keys_[key], &len);
    return {bytes, len};
}

// Through the key, open as the request's next command may want it.
bool RedisStore::exists(KeyNumber key)
{
    return redis::KeyType(open(key)) != redis::kKeyEmpty;
}

void RedisStore::get_named(std::string_view name, FieldValue *out)
{
    close();
    take_string(redis::Call(ctx_, "GET", "b", name.data(), name.size()),
                out);
}

double RedisStore::pttl_named(std::string_view name)
{
    close();
    RedisModuleCallReply *reply =
        redis::Call(ctx_, "PTTL", "b", name.data(), name.size());

    if (reply == nullptr) {
        return -2;
    }

    auto ttl = static_cast<double>(redis::CallReplyInteger(reply));
    redis::FreeCallReply(reply);
    return ttl;
}

CallError RedisStore::set_named(std::string_view name,
                                std::string_view value, const char *at_ms)
{
    if (CallError error = may_write(true)) {
        return error;
    }

    close();
    RedisModuleCallReply *reply =
        at_ms != nullptr
            ? redis::Call(ctx_, "SET", propagate_ ? "!bbcc" : "bbcc",
                          name.data(), name.size(), value.data(),
                          value.size(), "PXAT", at_ms)
            : redis::Call(ctx_, "SET", propagate_ ? "!bb" : "bb",
                          name.data(), name.size(), value.data(),
                          value.size());

    if (reply != nullptr) {
        redis::FreeCallReply(reply);
    }

    return nullptr;
}

void RedisStore::mark(KeyNumber marker, std::string_view member,
                      const char *score, const char *now_ms)
{
    close();
    redis::String *m = keys_[marker];
    drop_reply(redis::Call(ctx_, "ZADD", propagate_ ? "!scb" : "scb", m,
                           score, member.data(), member.size()));
    drop_reply(redis::Call(ctx_, "ZREMRANGEBYSCORE",
                           propagate_ ? "!scc" : "scc", m, "-inf", now_ms));
    RedisModuleCallReply *top =
        redis::Call(ctx_, "ZRANGE", "sccc", m, "-1", "-1", "WITHSCORES");
    RedisModuleCallReply *at =
        top != nullptr && redis::CallReplyType(top) == redis::kReplyArray
            ? redis::CallReplyArrayElement(top, 1) : nullptr;
    std::size_t len = 0;
    const char *bytes =
        at != nullptr ? redis::CallReplyStringPtr(at, &len) : nullptr;
    std::string score_text(bytes != nullptr ? bytes : "", len);

    if (score_text == "inf") {
        drop_reply(redis::Call(ctx_, "PERSIST", propagate_ ? "!s" : "s", m));
    } else if (bytes != nullptr) {
        drop_reply(redis::Call(ctx_, "PEXPIREAT", propagate_ ? "!sc" : "sc",
                               m, score_text.c_str()));
    }

    drop_reply(top);
}

void RedisStore::release() noexcept
{
    close();

    for (redis::String *made : made_) {
        redis::FreeString(ctx_, made);
    }

    made_.clear();
}

}  // namespace ratelimit
