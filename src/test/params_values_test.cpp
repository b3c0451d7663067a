#include "params/param_values.hpp"

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

constexpr std::uint64_t kMaxMs = 9223372036854775807u;  // 2^63 - 1

TEST(ParseTimeMs, ReadsNginxTimes)
{
    struct Case {
        const char *text;
        std::uint64_t ms;
    };
    const Case cases[] = {
        {"1ms", 1},
        {"50ms", 50},
        {"2s", 2000},
        {"2", 2000},                  // a bare number is seconds
        {"1m", 60000},
        {"1h", 3600000},
        {"1d", 86400000},
        {"1w", 604800000},
        {"1m30s", 90000},
        {"1h 5m", 3900000},           // spaces after a unit
        {"1s500ms", 1500},
        {"1s5", 6000},                // the last bare number: seconds
        {"5 3", 8000},                // a number then a space: seconds
        {"61ms", 61},
        {"007s", 7000},
        {"9223372036854775807ms", kMaxMs},
        {"9223372036854775s", 9223372036854775000u},
    };

    for (const Case &c : cases) {
        SCOPED_TRACE(c.text);
        auto ms = parse_time_ms(c.text);
        ASSERT_TRUE(ms.has_value());
        EXPECT_EQ(*ms, c.ms);
    }
}

TEST(ParseTimeMs, RefusesWhatNginxRefusesAndZero)
{
    const std::string cases[] = {
        "", "0", "0ms", "0s", "ms", "s", "-1s", "+1s", "1x", "1.5s", "1y",
        "1M", "1s1m", "1m1h", "1ms1s", "1s1s", "1ms1ms", "5 3 ", "1s 5 ",
        "5 3s", " 1s", "1 s", "abc", "1S", "1H",
        "9223372036854775808ms", "9223372036854776s",
        "9223372036854775807ms1ms", "99999999999999999999",
        "999999999999999d", "1r/s", std::string("1\0s", 3),
    };

    for (const std::string &text : cases) {
        SCOPED_TRACE(text);
        EXPECT_FALSE(parse_time_ms(text).has_value());
    }
}

TEST(ParseNginxInt, ReadsDigitsOnly)
{
    EXPECT_EQ(parse_nginx_int("0"), 0);
    EXPECT_EQ(parse_nginx_int("00"), 0);
    EXPECT_EQ(parse_nginx_int("15"), 15);
    EXPECT_EQ(parse_nginx_int("9223372036854775807"),
              std::int64_t{9223372036854775807});

    const char *bad[] = {"", "-1", "+1", "1x", " 1", "1.0", "0x10",
                         "9223372036854775808", "18446744073709551616"};

    for (const char *text : bad) {
        SCOPED_TRACE(text);
        EXPECT_FALSE(parse_nginx_int(text).has_value());
    }
}

bool valid_short(std::string_view value)
{
    return value.size() < 3;
}

TEST(TakeNamedParam, FindsChecksAndRefuses)
{
    const NamedParam table[] = {
        {"a", 1, nullptr},
        {"b", 2, nullptr},
        {"c", 1, valid_short},
    };
    std::optional<std::string_view> values[3];

    EXPECT_EQ(take_named_param(table, 3, 1, "a=x=y", values), std::nullopt);
    EXPECT_EQ(values[0], "x=y");
    EXPECT_EQ(take_named_param(table, 3, 1, "a=", values),
              "duplicate parameter \"a=\"");
    EXPECT_EQ(take_named_param(table, 3, 1, "b=1", values),
              "invalid parameter \"b=1\"");  // another form's
    EXPECT_EQ(take_named_param(table, 3, 1, "c=long", values),
              "invalid parameter \"c=long\"");
    EXPECT_EQ(take_named_param(table, 3, 1, "c=ok", values), std::nullopt);
    EXPECT_EQ(values[2], "ok");
    EXPECT_EQ(take_named_param(table, 3, 1, "c", values),
              "invalid parameter \"c\"");
    EXPECT_EQ(take_named_param(table, 3, 1, "=a", values),
              "invalid parameter \"=a\"");
    EXPECT_EQ(take_named_param(table, 3, 1, "A=1", values),
              "invalid parameter \"A=1\"");
    EXPECT_FALSE(values[1].has_value());
}

}  // namespace
}  // namespace ratelimit
