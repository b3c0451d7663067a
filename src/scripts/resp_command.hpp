// A Redis command in its protocol (RESP), made from its words.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ratelimit {

// The command of `argc` words `argv`: an array of bulk strings.  Throws
// std::bad_alloc.
std::string format_command(const std::string_view *argv, std::size_t argc);

template <std::size_t kArgc>
std::string format_command(const std::string_view (&argv)[kArgc])
{
    return format_command(argv, kArgc);
}

}  // namespace ratelimit
