// A side key's value (keys/subject_key.hpp) as the status API's scripts
// rewrite it (override_call.cpp, forgive_call.cpp): the Lua function each
// puts before its own text.
#pragma once

#include <string_view>

namespace ratelimit {

// parts_without(v, tag): the parts of side value v, the runs between ";"
// as the window script splits them (lua/override.lua), that do not start
// with `tag` ("o=", "b="), in their order.
constexpr std::string_view kPartsWithoutLua = R"lua(
local function parts_without(v, tag)
  local keep = {}
  for part in string.gmatch(v, '[^;]+') do
    if string.sub(part, 1, #tag) ~= tag then
      keep[#keep + 1] = part
    end
  end
  return keep
end
)lua";

}  // namespace ratelimit
