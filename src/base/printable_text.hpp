// Bytes from outside (a client's key, a Redis server's error reply, an
// address a node names) as they may stand in one line of a log: nothing in
// them can end the line or the quotes around them.
#pragma once

#include <cstddef>
#include <string_view>

namespace ratelimit {

// At most `max_shown` bytes of `text` shown, printable ASCII kept, '\'
// and every other byte (a newline, a control, non-ASCII) as \xHH, and '"'
// too if the text stands between quotes, "..." appended when cut.  `out`
// holds printable_size(max_shown) bytes; returns the number written.
constexpr std::size_t printable_size(std::size_t max_shown)
{
    return max_shown * 4 + 3;
}
enum class Quoted { kNo, kYes };
std::size_t write_printable(std::string_view text, std::size_t max_shown,
                            char *out, Quoted quoted = Quoted::kYes);

}  // namespace ratelimit
