#include "limits/rate_headers.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

constexpr char kCanary = '\x5a';
constexpr std::size_t kGuard = 16;

// Runs `write` on a buffer of exactly `size` bytes with a guard after it.
template <typename Write>
std::string written(std::size_t size, Write write)
{
    std::vector<char> buf(size + kGuard, kCanary);
    std::size_t n = write(buf.data());

    EXPECT_LE(n, size);
    for (std::size_t i = size; i < buf.size(); i++) {
        EXPECT_EQ(buf[i], kCanary) << "overwrote guard byte " << i - size;
    }
    return std::string(buf.data(), std::min(n, size));
}

std::string decimal(std::uint64_t value)
{
    return written(kMaxDigits, [&](char *out) {
        return write_decimal(value, out);
    });
}

std::string policy_member(std::string_view zone, std::uint64_t limit,
                          std::uint64_t window_s)
{
    return written(policy_member_max_size(zone), [&](char *out) {
        return write_policy_member(zone, limit, window_s, out);
    });
}

std::string ratelimit_field(std::string_view zone, std::uint64_t remaining,
                            std::uint64_t reset_s)
{
    return written(ratelimit_field_max_size(zone), [&](char *out) {
        return write_ratelimit_field(zone, remaining, reset_s, out);
    });
}

TEST(WriteDecimal, Values)
{
    EXPECT_EQ(decimal(0), "0");
    EXPECT_EQ(decimal(9), "9");
    EXPECT_EQ(decimal(10), "10");
    EXPECT_EQ(decimal(99), "99");
    EXPECT_EQ(decimal(100), "100");
    EXPECT_EQ(decimal(1700000000123), "1700000000123");
    EXPECT_EQ(decimal(std::uint64_t{1} << 53), "9007199254740992");
    EXPECT_EQ(decimal(10000000000000000000u), "10000000000000000000");
    EXPECT_EQ(decimal(UINT64_MAX), "18446744073709551615");
    EXPECT_EQ(decimal(UINT64_MAX).size(), kMaxDigits);
}

TEST(WriteDecimal, PowersOfTen)
{
    std::uint64_t v = 1;
    std::string expected = "1";
    for (int i = 0; i < 20; i++) {
        EXPECT_EQ(decimal(v), expected);
        EXPECT_EQ(decimal(v - 1), std::to_string(v - 1));
        v *= 10;
        expected += "0";
    }
}

TEST(PolicyMember, Text)
{
    EXPECT_EQ(policy_member("api", 10, 60), "\"api\";q=10;w=60");
    EXPECT_EQ(policy_member("login.v2-x_y", 1, 1),
              "\"login.v2-x_y\";q=1;w=1");
    EXPECT_EQ(policy_member("z", 9007199254740992u, 86400),
              "\"z\";q=9007199254740992;w=86400");
}

TEST(PolicyMember, MaxSizeFitsLargestValues)
{
    std::string s = policy_member("api", UINT64_MAX, UINT64_MAX);
    EXPECT_EQ(s, "\"api\";q=18446744073709551615;w=18446744073709551615");
    EXPECT_EQ(s.size(), policy_member_max_size("api"));

    std::string empty = policy_member("", UINT64_MAX, UINT64_MAX);
    EXPECT_EQ(empty.size(), policy_member_max_size(""));
}

TEST(RateLimitField, Text)
{
    EXPECT_EQ(ratelimit_field("api", 3, 17), "\"api\";r=3;t=17");
    EXPECT_EQ(ratelimit_field("api", 0, 0), "\"api\";r=0;t=0");
    EXPECT_EQ(ratelimit_field("per_user", 100, 3600),
              "\"per_user\";r=100;t=3600");
}

TEST(RateLimitField, MaxSizeFitsLargestValues)
{
    std::string zone(200, 'z');
    std::string s = ratelimit_field(zone, UINT64_MAX, UINT64_MAX);
    EXPECT_EQ(s, "\"" + zone + "\";r=18446744073709551615;t="
                 "18446744073709551615");
    EXPECT_EQ(s.size(), ratelimit_field_max_size(zone));
}

TEST(WriteDecimal, MaxDigitsHoldsLargestValue)
{
    EXPECT_EQ(std::to_string(UINT64_MAX).size(), kMaxDigits);
}

TEST(RetryAfter, AtLeastOneSecond)
{
    EXPECT_EQ(retry_after_seconds(0), 1u);
    EXPECT_EQ(retry_after_seconds(1), 1u);
    EXPECT_EQ(retry_after_seconds(5), 5u);
    EXPECT_EQ(retry_after_seconds(UINT64_MAX), UINT64_MAX);
    static_assert(retry_after_seconds(0) == 1);
}

}  // namespace
}  // namespace ratelimit
