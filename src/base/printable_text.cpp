#include "base/printable_text.hpp"

namespace ratelimit {

std::size_t write_printable(std::string_view text, std::size_t max_shown,
                            char *out, Quoted quoted)
{
    static const char kDigits[] = "0123456789abcdef";
    char *p = out;

    for (std::size_t i = 0; i < text.size() && i < max_shown; i++) {
        auto c = static_cast<unsigned char>(text[i]);

        bool kept = c >= 0x20 && c < 0x7f && c != '\\'
                    && (c != '"' || quoted == Quoted::kNo);

        if (kept) {
            *p++ = static_cast<char>(c);
        } else {
            *p++ = '\\';
            *p++ = 'x';
            *p++ = kDigits[c >> 4];
            *p++ = kDigits[c & 0xf];
        }
    }

    if (text.size() > max_shown) {
        *p++ = '.';
        *p++ = '.';
        *p++ = '.';
    }

    return static_cast<std::size_t>(p - out);
}

}  // namespace ratelimit
