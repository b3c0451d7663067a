#include "limits/rate_headers.hpp"

#include <charconv>
#include <cstring>

namespace ratelimit {

namespace {

char *append(char *out, std::string_view part)
{
    std::memcpy(out, part.data(), part.size());
    return out + part.size();
}

// "NAME";A=FIRST;B=SECOND, the shape both structured fields share.
std::size_t write_member(std::string_view zone, std::string_view first_key,
                         std::uint64_t first, std::string_view second_key,
                         std::uint64_t second, char *out)
{
    char *p = out;
    *p++ = '"';
    p = append(p, zone);
    *p++ = '"';
    p = append(p, first_key);
    p += write_decimal(first, p);
    p = append(p, second_key);
    p += write_decimal(second, p);
    return static_cast<std::size_t>(p - out);
}

}  // namespace

std::size_t write_decimal(std::uint64_t value, char *out)
{
    return static_cast<std::size_t>(
        std::to_chars(out, out + kMaxDigits, value).ptr - out);
}

std::size_t write_policy_member(std::string_view zone, std::uint64_t limit,
                                std::uint64_t window_s, char *out)
{
    return write_member(zone, ";q=", limit, ";w=", window_s, out);
}

std::size_t write_ratelimit_field(std::string_view zone,
                                  std::uint64_t remaining,
                                  std::uint64_t reset_s, char *out)
{
    return write_member(zone, ";r=", remaining, ";t=", reset_s, out);
}

}  // namespace ratelimit
