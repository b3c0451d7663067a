// Text of the rate-limit response headers, IETF httpapi draft syntax
// (draft-ietf-httpapi-ratelimit-headers) and the older X-RateLimit-* trio.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ratelimit {

// Longest decimal form of a std::uint64_t.
constexpr std::size_t kMaxDigits = 20;

// One member of RateLimit-Policy: "NAME";q=LIMIT;w=WINDOW_SECONDS.  Zone
// names are tokens (letters, digits, '_', '-', '.'), so they need no escape.
constexpr std::size_t policy_member_max_size(std::string_view zone)
{
    return zone.size() + 2 + 3 + kMaxDigits + 3 + kMaxDigits;
}
std::size_t write_policy_member(std::string_view zone, std::uint64_t limit,
                                std::uint64_t window_s, char *out);

// RateLimit: "NAME";r=REMAINING;t=SECONDS.
constexpr std::size_t ratelimit_field_max_size(std::string_view zone)
{
    return zone.size() + 2 + 3 + kMaxDigits + 3 + kMaxDigits;
}
std::size_t write_ratelimit_field(std::string_view zone,
                                  std::uint64_t remaining,
                                  std::uint64_t reset_s, char *out);

// Decimal digits of value; out holds kMaxDigits bytes.
std::size_t write_decimal(std::uint64_t value, char *out);

// Seconds a rejected client is told to wait: the reset, at least 1, because
// "Retry-After: 0" invites an immediate retry that is sure to fail.
constexpr std::uint64_t retry_after_seconds(std::uint64_t reset_s)
{
    return reset_s > 0 ? reset_s : 1;
}

}  // namespace ratelimit
