#include "scripts/servers_script.hpp"

#include "scripts/resp_command.hpp"

namespace ratelimit {

namespace {

constexpr std::string_view kScript = R"(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] ~= '' then
    local ttl = tonumber(ARGV[2])
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
    redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
    redis.call('PEXPIRE', KEYS[1], ttl)
end
return redis.call('ZCOUNT', KEYS[1], now + 1, '+inf')
)";

}  // namespace

std::string_view servers_script()
{
    return kScript;
}

std::string servers_key(std::string_view prefix, bool cluster)
{
    std::string key;

    key.reserve(prefix.size() + 10);

    if (cluster) {
        key.append(1, '{').append(prefix).append(1, '}');
    } else {
        key.append(prefix);
    }

    return key.append(":servers");
}

std::string servers_call(std::string_view key, std::string_view id)
{
    std::string ttl = std::to_string(kServerTtlMs);
    std::string_view argv[] = {"EVAL", kScript, "1", key, id, ttl};
    return format_command(argv);
}

}  // namespace ratelimit
