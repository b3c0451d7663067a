// A side key's value (keys/subject_key.hpp) as the status API's scripts
// rewrite it (override_call.cpp, forgive_call.cpp): the Lua functions each
// puts before its own text.
#pragma once

#include <string_view>

namespace ratelimit {

// parts_without(v, tag): the parts of side value v, the runs between ";"
// as the window script splits them (lua/override.lua), that do not start
// with `tag` ("o=", "b="), in their order.  put_parts(key, marker, keep):
// side key `key` holds the parts `keep`, its expiry kept, or where there
// are none it is deleted and taken out of its zone's marker.
constexpr std::string_view kSidePartsLua = R"lua(
local function parts_without(v, tag)
  local keep = {}
  for part in string.gmatch(v, '[^;]+') do
    if string.sub(part, 1, #tag) ~= tag then
      keep[#keep + 1] = part
    end
  end
  return keep
end
local function put_parts(key, marker, keep)
  if #keep > 0 then
    redis.call('SET', key, table.concat(keep, ';'), 'KEEPTTL')
  else
    redis.call('DEL', key)
    redis.pcall('ZREM', marker, key)
  end
end
)lua";

}  // namespace ratelimit
