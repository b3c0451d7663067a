// The store (store/store.hpp) in memory, for the unit tests: keys named by
// the test, each a hash or a string with an expiry time, expired as Redis
// expires them (gone once the clock is past it).  Errors as Redis's for a
// key of the other type; no replication, no out of memory.
#pragma once

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace ratelimit::test {

class MemoryStore final : public Store {
public:
    struct Value {
        bool hash = true;
        std::map<std::string, std::string> fields;  // a hash's
        std::string text;                           // a string's
        double expire_at_ms = -1;                   // -1: none
        bool zset = false;                          // a marker's (fields:
                                                    // member, score text)
    };

    double now_ms = 0;                // the clock expiry is judged by
    std::deque<std::string> names;    // KeyNumber's names; else its digits
                                      // (key_name() adds them: views of
                                      // them stay valid)
    std::map<std::string, Value> keys;
    std::vector<std::string> writes;  // the write commands made, by name

    // The live key `name`, or nullptr.
    Value *find(const std::string &name);

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
    void release() noexcept override { answered_.clear(); }

private:
    std::string name_of(KeyNumber key) const;
    Value *live(KeyNumber key);
    FieldValue answer(const std::string &text);

    std::deque<std::string> answered_;  // what reads answered, till release()
};

}  // namespace ratelimit::test
