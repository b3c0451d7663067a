#include "scripts/resp_command.hpp"

#include <charconv>

namespace ratelimit {

namespace {

// "*N\r\n" or "$N\r\n" at most: a mark, 20 digits, CRLF.
constexpr std::size_t kHeaderMax = 23;

// An array's header (mark '*', N its words) or a bulk string's ('$', N
// its bytes).
void append_header(std::string *out, char mark, std::size_t n)
{
    char digits[20];
    char *end = std::to_chars(digits, digits + sizeof(digits), n).ptr;

    out->push_back(mark);
    out->append(digits, end);
    out->append("\r\n", 2);
}

}  // namespace

std::string format_command(const std::string_view *argv, std::size_t argc)
{
    std::size_t size = kHeaderMax;

    for (std::size_t i = 0; i < argc; i++) {
        size += kHeaderMax + argv[i].size() + 2;
    }

    std::string out;

    out.reserve(size);
    append_header(&out, '*', argc);

    for (std::size_t i = 0; i < argc; i++) {
        append_header(&out, '$', argv[i].size());
        out.append(argv[i]).append("\r\n", 2);
    }

    return out;
}

}  // namespace ratelimit
