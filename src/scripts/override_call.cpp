#include "scripts/override_call.hpp"

#include "scripts/resp_command.hpp"
#include "scripts/side_parts.hpp"

namespace ratelimit {

namespace {

// ARGV: channel, message, the limit (empty: remove), the window in ms, the
// ms until it lapses (0: never).  The override replaced, `was`, is the one
// in force as the window script reads it (lua/override.lua's override()):
// the first part of the form o=L,W,X, L and X at most 2^53, W from 1 to
// 604800000000000 (call.lua's W), not lapsed; so the log's "(was N)" names
// the limit that applied.  Its pattern and bounds are written out here as
// there: that script is assembled from lua/ (assemble.pl), whose bounds
// are Lua literals too, and this one is a raw string.
constexpr std::string_view kScript = R"lua(
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local old = redis.pcall('GET', KEYS[1])
old = type(old) == 'string' and old or ''
local l, w, x = string.match(';' .. old .. ';', ';o=(%d+),(%d+),(%d+);')
l, w, x = tonumber(l), tonumber(w), tonumber(x)
local was = l and l <= 2^53 and w >= 1 and w <= 604800000000000
            and x <= 2^53 and (x == 0 or x > now) and l
local keep = parts_without(old, 'o=')
local at = tonumber(ARGV[5]) > 0 and now + tonumber(ARGV[5]) or 0
if ARGV[3] ~= '' then
  keep[#keep + 1] = string.format('o=%s,%s,%d', ARGV[3], ARGV[4], at)
  local ttl = redis.call('PTTL', KEYS[1])
  local value = table.concat(keep, ';')
  if at == 0 or ttl == -1 and #keep > 1 then
    redis.call('SET', KEYS[1], value)
  else
    redis.call('SET', KEYS[1], value, 'PXAT',
               string.format('%d', math.max(at, ttl > 0 and now + ttl or 0)))
  end
  redis.pcall('ZADD', KEYS[2], at == 0 and '+inf' or string.format('%d', at),
              KEYS[1])
else
  put_parts(KEYS[1], KEYS[2], keep)
end
redis.pcall('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%d', now))
local top = redis.pcall('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if type(top) == 'table' and top[2] == 'inf' then
  redis.call('PERSIST', KEYS[2])
elseif type(top) == 'table' and top[2] then
  redis.call('PEXPIREAT', KEYS[2], top[2])
end
return {redis.call('PUBLISH', ARGV[1], ARGV[2]), was or -1}
)lua";

}  // namespace

std::string format_override_call(std::string_view side_key,
                                 std::string_view marker,
                                 std::string_view channel,
                                 std::string_view message,
                                 const OverrideChange &change)
{
    std::string limit = change.remove ? "" : std::to_string(change.limit);
    std::string window = std::to_string(change.window_ms);
    std::string ttl = std::to_string(change.ttl_ms);
    std::string script(kSidePartsLua);
    script.append(kScript);
    std::string_view argv[] = {"EVAL", script, "2", side_key, marker,
                               channel, message, limit, window, ttl};
    return format_command(argv);
}

}  // namespace ratelimit
