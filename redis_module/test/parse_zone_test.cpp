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

}  // namespace

}  // namespace ratelimit::test
