#include "limits/policy.hpp"

#include <charconv>

namespace ratelimit {

namespace {

// 2^53: the largest integer a Lua 5.1 number (a double) holds exactly.
constexpr std::uint64_t kMaxExactInteger = std::uint64_t{1} << 53;

}  // namespace

std::optional<std::uint64_t> parse_count(std::string_view text)
{
    auto value = parse_units(text);

    return value && *value > 0 ? value : std::nullopt;
}

std::optional<std::uint64_t> parse_units(std::string_view text)
{
    std::uint64_t value = 0;
    const char *end = text.data() + text.size();

    if (text.empty() || text.front() < '0' || text.front() > '9') {
        return std::nullopt;
    }

    auto [ptr, ec] = std::from_chars(text.data(), end, value);

    if (ec != std::errc() || ptr != end || value > kMaxExactInteger) {
        return std::nullopt;
    }

    return value;
}

char rate_unit(std::uint64_t window_ms)
{
    return window_ms == 1000 ? 's' : window_ms == 60 * 1000 ? 'm'
           : window_ms == 60 * 60 * 1000 ? 'h' : 'd';
}

std::optional<Rate> parse_rate(std::string_view text)
{
    constexpr std::string_view kSuffix = "r/?";

    if (text.size() <= kSuffix.size()) {
        return std::nullopt;
    }

    std::string_view unit = text.substr(text.size() - kSuffix.size());

    if (unit[0] != 'r' || unit[1] != '/') {
        return std::nullopt;
    }

    std::uint64_t window_ms;

    switch (unit[2]) {
    case 's': window_ms = 1000; break;
    case 'm': window_ms = 60 * 1000; break;
    case 'h': window_ms = 60 * 60 * 1000; break;
    case 'd': window_ms = 24 * 60 * 60 * 1000; break;
    default: return std::nullopt;
    }

    auto limit = parse_count(text.substr(0, text.size() - kSuffix.size()));

    if (!limit) {
        return std::nullopt;
    }

    return Rate{*limit, window_ms};
}

std::optional<std::uint64_t> limit_from_value(std::string_view value,
                                              bool rate,
                                              std::uint64_t window_ms)
{
    if (!rate) {
        return parse_count(value);
    }

    auto parsed = parse_rate(value);

    if (!parsed) {
        return std::nullopt;
    }

    // At most 2^53 times 2^50 ms (a million weeks): no overflow in 128 bits.
    unsigned __int128 limit = static_cast<unsigned __int128>(parsed->limit)
                              * window_ms / parsed->window_ms;

    if (limit == 0 || limit > kMaxExactInteger) {
        return std::nullopt;
    }

    return static_cast<std::uint64_t>(limit);
}

bool blocks_all(std::string_view value, bool rate)
{
    std::string_view number = value;

    if (rate) {
        std::string_view unit = value.substr(value.find('r') + 1);

        if (value.find('r') == std::string_view::npos || unit.size() != 2
            || unit[0] != '/' || std::string_view("smhd").find(unit[1])
                                 == std::string_view::npos)
        {
            return false;
        }

        number = value.substr(0, value.size() - 3);
    }

    auto units = parse_units(number);
    return units && *units == 0;
}

std::uint64_t default_bucket_ms(std::uint64_t window_ms)
{
    for (std::uint64_t n = kMaxDefaultBuckets; n > 1; n--) {
        if (window_ms % n == 0) {
            return window_ms / n;
        }
    }

    return window_ms;
}

}  // namespace ratelimit
