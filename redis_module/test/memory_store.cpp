#include "test/memory_store.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace ratelimit::test {

MemoryStore::Value *MemoryStore::find(const std::string &name)
{
    auto it = keys.find(name);

    if (it == keys.end()) {
        return nullptr;
    }

    if (it->second.expire_at_ms >= 0 && now_ms > it->second.expire_at_ms) {
        keys.erase(it);
        return nullptr;
    }

    return &it->second;
}

MemoryStore::Value *MemoryStore::live(KeyNumber key)
{
    return find(name_of(key));
}

std::string MemoryStore::name_of(KeyNumber key) const
{
    return key < names.size() ? names[key] : std::to_string(key);
}

FieldValue MemoryStore::answer(const std::string &text)
{
    answered_.push_back(text);
    return FieldValue{answered_.back(), true};
}

CallError MemoryStore::hmget(KeyNumber key, const char *const *fields,
                             std::size_t count, FieldValue *out)
{
    Value *value = live(key);

    if (value != nullptr && !value->hash) {
        return kWrongType;
    }

    for (std::size_t i = 0; i < count; i++) {
        out[i] = FieldValue{};

        if (value != nullptr) {
            auto it = value->fields.find(fields[i]);

            if (it != value->fields.end()) {
                out[i] = answer(it->second);
            }
        }
    }

    return nullptr;
}

CallError MemoryStore::hgetall(KeyNumber key, FieldPairs *out)
{
    Value *value = live(key);
    out->clear();

    if (value != nullptr && !value->hash) {
        return kWrongType;
    }

    if (value != nullptr) {
        out->assign(value->fields.begin(), value->fields.end());
    }

    return nullptr;
}

CallError MemoryStore::hset(KeyNumber key, const char *const *fields_values,
                            std::size_t pairs)
{
    writes.emplace_back("HSET");
    Value *value = live(key);

    if (value != nullptr && !value->hash) {
        return kWrongType;
    }

    if (value == nullptr) {
        value = &keys[name_of(key)];
    }

    for (std::size_t i = 0; i < pairs; i++) {
        value->fields[fields_values[2 * i]] = fields_values[2 * i + 1];
    }

    return nullptr;
}

CallError MemoryStore::hdel(KeyNumber key, const std::string *fields,
                            std::size_t count)
{
    writes.emplace_back("HDEL");
    Value *value = live(key);

    if (value != nullptr && !value->hash) {
        return kWrongType;
    }

    if (value == nullptr) {
        return nullptr;
    }

    for (std::size_t i = 0; i < count; i++) {
        value->fields.erase(fields[i]);
    }

    if (value->fields.empty()) {
        return del(key);
    }

    return nullptr;
}

CallError MemoryStore::del(KeyNumber key)
{
    writes.emplace_back("DEL");
    keys.erase(name_of(key));
    return nullptr;
}

CallError MemoryStore::pexpireat(KeyNumber key, const char *at_ms)
{
    writes.emplace_back("PEXPIREAT");
    if (Value *value = live(key)) {
        value->expire_at_ms = std::strtod(at_ms, nullptr);
    }

    return nullptr;
}

CallError MemoryStore::get(KeyNumber key, FieldValue *out)
{
    Value *value = live(key);
    *out = FieldValue{};

    if (value == nullptr) {
        return nullptr;
    }

    if (value->hash) {
        return kWrongType;
    }

    *out = answer(value->text);
    return nullptr;
}

std::string_view MemoryStore::key_name(KeyNumber key)
{
    while (names.size() <= key) {
        names.push_back(std::to_string(names.size()));
    }

    return names[key];
}

bool MemoryStore::exists(KeyNumber key)
{
    return live(key) != nullptr;
}

void MemoryStore::get_named(std::string_view name, FieldValue *out)
{
    Value *value = find(std::string(name));
    *out = value != nullptr && !value->hash ? answer(value->text)
                                            : FieldValue{};
}

double MemoryStore::pttl_named(std::string_view name)
{
    Value *value = find(std::string(name));

    if (value == nullptr) {
        return -2;
    }

    return value->expire_at_ms < 0 ? -1 : value->expire_at_ms - now_ms;
}

CallError MemoryStore::set_named(std::string_view name,
                                 std::string_view text, const char *at_ms)
{
    writes.emplace_back("SET");
    Value &value = keys[std::string(name)];
    value = Value{};
    value.hash = false;
    value.text = text;
    value.expire_at_ms = at_ms != nullptr ? std::stod(at_ms) : -1;
    return nullptr;
}

// A sorted set of scores as text ("+inf" the largest): enough of ZADD,
// ZREMRANGEBYSCORE and the top score for a marker.
void MemoryStore::mark(KeyNumber marker, std::string_view member,
                       const char *score, const char *now)
{
    writes.emplace_back("ZADD");
    Value *value = live(marker);

    if (value != nullptr && !value->zset) {
        return;
    }

    if (value == nullptr) {
        value = &keys[name_of(marker)];
        value->hash = false;
        value->zset = true;
    }

    value->fields[std::string(member)] = score;
    double top = -1;

    for (auto it = value->fields.begin(); it != value->fields.end();) {
        double at = it->second == "+inf" ? -2 : std::stod(it->second);

        if (at >= 0 && at <= std::stod(now)) {
            it = value->fields.erase(it);
            continue;
        }

        top = at == -2 || top == -2 ? -2 : std::max(top, at);
        ++it;
    }

    value->expire_at_ms = top == -2 ? -1 : top;
}

CallError MemoryStore::set_pxat(KeyNumber key, const char *text,
                                const char *at_ms)
{
    return set_bytes(key, text, at_ms);
}

KeyLayout MemoryStore::read_layout(KeyNumber key, std::string_view *bytes)
{
    Value *value = live(key);
    *bytes = {};

    if (value == nullptr) {
        return KeyLayout::kNone;
    }

    if (value->hash) {
        return KeyLayout::kHash;
    }

    *bytes = value->text;
    return KeyLayout::kPacked;
}

CallError MemoryStore::setrange(KeyNumber key, std::size_t offset,
                                std::string_view bytes)
{
    writes.emplace_back("SETRANGE");
    live(key)->text.replace(offset, bytes.size(), bytes);
    return nullptr;
}

CallError MemoryStore::set_bytes(KeyNumber key, std::string_view bytes,
                                 const char *at_ms)
{
    writes.emplace_back("SET");
    keys[name_of(key)] = Value{false, {}, std::string(bytes),
                               std::strtod(at_ms, nullptr)};
    return nullptr;
}

}  // namespace ratelimit::test
