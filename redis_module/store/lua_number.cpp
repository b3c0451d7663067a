#include "store/lua_number.hpp"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ratelimit::lua {

namespace {

// Most fields are short runs of digits: read without strtod, which was
// the costliest call of the script's conversions.
bool plain_digits(const char *bytes, std::size_t len, double *out)
{
    if (len == 0 || len > 15) {
        return false;
    }

    std::uint64_t value = 0;

    for (std::size_t i = 0; i < len; i++) {
        unsigned digit = static_cast<unsigned char>(bytes[i]) - '0';

        if (digit > 9) {
            return false;
        }

        value = value * 10 + digit;
    }

    *out = static_cast<double>(value);
    return true;
}

// Lua 5.1's luaO_str2d() on a C string.
bool str2d(const char *s, double *out)
{
    char *end;
    *out = std::strtod(s, &end);

    if (end == s) {
        return false;
    }

    if (*end == 'x' || *end == 'X') {
        *out = static_cast<double>(std::strtoul(s, &end, 16));
    }

    while (std::isspace(static_cast<unsigned char>(*end))) {
        end++;
    }

    return *end == '\0';
}

}  // namespace

bool to_number(const char *bytes, std::size_t len, double *out) noexcept
{
    if (plain_digits(bytes, len, out)) {
        return true;
    }

    const char *nul = static_cast<const char *>(std::memchr(bytes, 0, len));
    len = nul != nullptr ? static_cast<std::size_t>(nul - bytes) : len;
    char small[64];

    if (len < sizeof(small)) {
        std::memcpy(small, bytes, len);
        small[len] = '\0';
        return str2d(small, out);
    }

    try {
        return str2d(std::string(bytes, len).c_str(), out);
    } catch (...) {
        return false;
    }
}

std::int64_t to_integer(double x) noexcept
{
    // 2^63: the first double above every int64_t.
    constexpr double kLimit = 9223372036854775808.0;

    if (!(x >= -kLimit && x < kLimit)) {
        return INT64_MIN;
    }

    return static_cast<std::int64_t>(x);
}

std::size_t format(double x, char *out) noexcept
{
    std::int64_t value = to_integer(x);
    // The magnitude as unsigned: INT64_MIN has no positive int64_t.
    std::uint64_t rest = value < 0 ? 0 - static_cast<std::uint64_t>(value)
                                   : static_cast<std::uint64_t>(value);
    char digits[kMaxText];
    std::size_t n = 0;

    do {
        digits[n++] = static_cast<char>('0' + rest % 10);
        rest /= 10;
    } while (rest != 0);

    std::size_t len = 0;

    if (value < 0) {
        out[len++] = '-';
    }

    while (n > 0) {
        out[len++] = digits[--n];
    }

    out[len] = '\0';
    return len;
}

}  // namespace ratelimit::lua
