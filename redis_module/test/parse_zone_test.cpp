// A zone's arguments as the command reads them (zones/batch.hpp,
// parse_zone()): what nginx sends is taken; an unknown kind or mode, or
// numbers nginx does not send, refuse the whole call with the script's
// error, before any key is read.
#include <gtest/gtest.h>

#include <string_view>

#include "zones/batch.hpp"

namespace ratelimit::test {

namespace {

using namespace std::literals;

const char kUnknown[] = "ERR ratelimit: unknown zone kind or mode";
const char kBadNumbers[] =
    "ERR ratelimit: a zone's limit, bucket and span must be whole numbers "
    "from 1, the limit at most 2^53, bucket * span at most "
    "604800000000000 ms";
const char kBadEnds[] =
    "ERR ratelimit: a calendar zone's period ends must be whole numbers "
    "from 1 to 2^53, the first before the second";
const char kPast[] =
    "ERR ratelimit: redis's clock is past the calendar periods nginx sent";

// Zone arguments of a limit of 5 in 60 buckets of 1 s, of `kind` and
// `mode`, read at a whole minute.
const char *parse(std::string_view kind, std::string_view mode,
                  ZoneParams *zone)
{
    std::string_view args[] = {"5", "1000", "60", kind, mode};
    return parse_zone(args, 28333333.0 * 60000, true, zone);
}

TEST(ParseZone, TakesEachKindAndMode)
{
    ZoneParams zone{};

    ASSERT_EQ(parse("s", "1", &zone), nullptr);
    EXPECT_FALSE(zone.fixed);
    EXPECT_EQ(zone.gcra, 0);
    EXPECT_TRUE(zone.enforce);
    EXPECT_TRUE(zone.packed);
    EXPECT_EQ(zone.bucket, 28333333.0 * 60);
    EXPECT_STREQ(zone.bucket_field, "1699999980");

    ASSERT_EQ(parse("f", "0", &zone), nullptr);
    EXPECT_TRUE(zone.fixed);
    EXPECT_EQ(zone.gcra, 0);
    EXPECT_FALSE(zone.enforce);

    ASSERT_EQ(parse("g", "1", &zone), nullptr);
    EXPECT_FALSE(zone.fixed);
    EXPECT_EQ(zone.gcra, 200000);
    EXPECT_EQ(zone.side_base, "");

    // A side mode: its letter, then the zone's side key base.
    ASSERT_EQ(parse("s", "3rl:a+", &zone), nullptr);
    EXPECT_TRUE(zone.enforce);
    EXPECT_EQ(zone.side_base, "rl:a+");
    ASSERT_EQ(parse("g", "2{x}:a+", &zone), nullptr);
    EXPECT_FALSE(zone.enforce);
    EXPECT_EQ(zone.side_base, "{x}:a+");
}

// Not read as a sliding window, as it was.
TEST(ParseZone, RefusesAnUnknownKind)
{
    ZoneParams zone{};

    for (std::string_view kind :
         {"x"sv, ""sv, "S"sv, "sf"sv, "gcra"sv, "s\0"sv})
    {
        EXPECT_STREQ(parse(kind, "1", &zone), kUnknown) << kind;
    }
}

// Not read as dry run, as it was.
TEST(ParseZone, RefusesAnUnknownMode)
{
    ZoneParams zone{};

    for (std::string_view mode :
         {"4", "", "yes", "10", "01", "true", "2", "3", "1rl:a+", "0rl:a+",
          "4rl:a+"})
    {
        EXPECT_STREQ(parse("s", mode, &zone), kUnknown) << mode;
    }
}

// The numbers are checked first, as the script checks them.
TEST(ParseZone, RefusesNumbersNginxDoesNotSendFirst)
{
    ZoneParams zone{};
    std::string_view args[] = {"nan", "1000", "60", "x", "4"};

    EXPECT_STREQ(parse_zone(args, 0, false, &zone), kBadNumbers);
}

// Limit 0 is a side zone's only (it admits a subject only under its
// override); a GCRA zone's interval is then that of limit 1, finite.  Any
// other mode, a side mode's letter without a base or a base after another
// letter among them, refuses it as numbers nginx does not send, before an
// unknown kind.
TEST(ParseZone, LimitZeroInASideModeOnly)
{
    ZoneParams zone{};

    for (std::string_view kind : {"s"sv, "f"sv, "g"sv}) {
        for (std::string_view mode : {"3rl:a+"sv, "2rl:a+"sv}) {
            std::string_view args[] = {"0", "1000", "60", kind, mode};
            ASSERT_EQ(parse_zone(args, 0, true, &zone), nullptr)
                << kind << " " << mode;
            EXPECT_EQ(zone.limit, 0);
            EXPECT_EQ(zone.side_base, "rl:a+");
            EXPECT_EQ(zone.gcra, kind == "g" ? 1000000 : 0);
        }
    }

    for (std::string_view mode :
         {"1"sv, "0"sv, "3"sv, "2"sv, "1rl:a+"sv, "0rl:a+"sv, "4rl:a+"sv,
          ""sv})
    {
        std::string_view args[] = {"0", "1000", "60", "x", mode};
        EXPECT_STREQ(parse_zone(args, 0, true, &zone), kBadNumbers) << mode;
    }

    // What a side zone still refuses.
    for (std::string_view limit : {"-1"sv, "0.5"sv, "nan"sv, ""sv}) {
        std::string_view args[] = {limit, "1000", "60", "s", "3rl:a+"};
        EXPECT_STREQ(parse_zone(args, 0, true, &zone), kBadNumbers)
            << limit;
    }

    std::string_view args[] = {"0", "1000", "60", "x", "3rl:a+"};
    EXPECT_STREQ(parse_zone(args, 0, true, &zone), kUnknown);
}

// A calendar zone: its bucket and span slots hold the ends A < B of two
// periods, and Redis's clock chooses: before A, the period ending at A;
// from A to B - 1, the one ending at B; from B on, the call is refused.
// The zone is then a fixed window of 1 ms buckets and span 1, its bucket
// the period's last ms.
TEST(ParseZone, ACalendarZoneIsTheFixedWindowOfThePeriodTheClockChooses)
{
    const double a = 1700000000000, b = 1702592000000;
    std::string_view args[] = {"5", "1700000000000", "1702592000000", "c",
                               "1"};
    ZoneParams zone{};

    for (double now : {0.0, a - 3600000, a - 1}) {
        ASSERT_EQ(parse_zone(args, now, true, &zone), nullptr) << now;
        EXPECT_EQ(zone.bucket, a - 1) << now;
        EXPECT_STREQ(zone.bucket_field, "1699999999999");
    }

    for (double now : {a, a + 1, b - 1}) {
        ASSERT_EQ(parse_zone(args, now, true, &zone), nullptr) << now;
        EXPECT_EQ(zone.bucket, b - 1) << now;
        EXPECT_STREQ(zone.bucket_field, "1702591999999");
    }

    EXPECT_EQ(zone.limit, 5);
    EXPECT_EQ(zone.bucket_ms, 1);
    EXPECT_EQ(zone.span, 1);
    EXPECT_TRUE(zone.fixed);
    EXPECT_EQ(zone.gcra, 0);
    EXPECT_TRUE(zone.enforce);
    EXPECT_TRUE(zone.packed);
    EXPECT_EQ(zone.side_base, "");

    for (double now : {b, b + 1, b + 86400000.0 * 365}) {
        EXPECT_STREQ(parse_zone(args, now, true, &zone), kPast) << now;
    }

    // The bounds: 1 and 2^53, apart as far as they go.
    std::string_view widest[] = {"5", "1", "9007199254740992", "c", "0"};
    ASSERT_EQ(parse_zone(widest, 0, false, &zone), nullptr);
    EXPECT_EQ(zone.bucket, 0);
    ASSERT_EQ(parse_zone(widest, b, false, &zone), nullptr);
    EXPECT_STREQ(zone.bucket_field, "9007199254740991");
    EXPECT_FALSE(zone.enforce);
    EXPECT_FALSE(zone.packed);

    // Side modes, limit 0 among them, as any kind's.
    std::string_view side[] = {"0", "1700000000000", "1702592000000", "c",
                               "2rl:m+"};
    ASSERT_EQ(parse_zone(side, a, true, &zone), nullptr);
    EXPECT_EQ(zone.limit, 0);
    EXPECT_EQ(zone.side_base, "rl:m+");
    EXPECT_FALSE(zone.enforce);
    EXPECT_EQ(zone.bucket, b - 1);
}

// Period ends nginx does not send refuse the call with their own error,
// before the limit's and the mode's; then the other errors come in their
// order, the clock's last.  Numbers a calendar zone takes are still a
// fixed zone's error.
TEST(ParseZone, RefusesCalendarEndsNginxDoesNotSend)
{
    ZoneParams zone{};
    const std::string_view bad[][2] = {
        {"0", "5"},    {"5", "5"},   {"6", "5"},   {"-1", "5"},
        {"1.5", "5"},  {"1", "5.5"}, {"1", "9007199254740994"},
        {"9007199254740994", "9007199254740996"},  {"nan", "5"},
        {"1", "inf"},  {"", "5"},    {"1", ""},    {"1e300", "1e301"},
    };

    for (const auto &ends : bad) {
        for (std::string_view limit : {"5"sv, "x"sv}) {
            for (std::string_view mode : {"1"sv, "4"sv}) {
                std::string_view args[] = {limit, ends[0], ends[1], "c",
                                           mode};
                EXPECT_STREQ(parse_zone(args, 0, true, &zone), kBadEnds)
                    << ends[0] << " " << ends[1] << " " << limit << " "
                    << mode;
            }
        }
    }

    // At 10, a clock past both ends.
    const std::string_view errors[][3] = {
        {"x", "1", kBadNumbers},  {"0", "1", kBadNumbers},
        {"5", "4", kUnknown},     {"5", "3", kUnknown},
        {"5", "1", kPast},
    };

    for (const auto &e : errors) {
        std::string_view args[] = {e[0], "2", "3", "c", e[1]};
        EXPECT_STREQ(parse_zone(args, 10, true, &zone), e[2].data())
            << e[0] << " " << e[1];
    }

    std::string_view fixed[] = {"5", "1", "9007199254740992", "f", "1"};
    EXPECT_STREQ(parse_zone(fixed, 0, true, &zone), kBadNumbers);
}

}  // namespace

}  // namespace ratelimit::test
