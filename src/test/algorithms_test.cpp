#include "limits/algorithms.hpp"

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "params/zone_params.hpp"

namespace ratelimit {
namespace {

// A zone of `name` parsed from ratelimit_zone's parameters: a rate's,
// of a calendar zone a day's.
ParamResult<ZoneParams> zone_of(std::string_view name,
                                std::string_view extra = "")
{
    static const std::string kCalendar = "calendar";
    std::string algorithm = "algorithm=" + std::string(name);
    ParamTokens tokens{"z", "key=$k", "rate=10r/s", algorithm};

    if (name == kCalendar) {
        tokens = {"z", "key=$k", "limit=10", "window=day", algorithm};
    }

    if (!extra.empty()) {
        tokens.push_back(extra);
    }

    return parse_zone_params(tokens);
}

TEST(Algorithms, RowsAreInTheOrderOfTheirAlgorithm)
{
    for (std::size_t i = 0; i < kAlgorithmCount; i++) {
        Policy policy{10, 1000, 1000, static_cast<Algorithm>(i)};

        EXPECT_EQ(&row_of(policy), &kAlgorithms[i]);
        EXPECT_EQ(row_of(policy).algorithm, policy.algorithm);
    }
}

TEST(Algorithms, NamesAndWireKindsAreUniqueAndParseBack)
{
    std::set<std::string_view> names;
    std::set<char> kinds;

    for (const AlgorithmRow &row : kAlgorithms) {
        SCOPED_TRACE(std::string(row.name));
        EXPECT_FALSE(row.name.empty());
        EXPECT_TRUE(names.insert(row.name).second);
        EXPECT_TRUE(kinds.insert(row.wire_kind).second);
        EXPECT_EQ(algorithm_named(row.name), &row);

        auto zone = zone_of(row.name);
        ASSERT_FALSE(zone.error) << zone.error->text;
        EXPECT_EQ(zone.params.policy.algorithm, row.algorithm);
    }

    EXPECT_EQ(algorithm_named("Fixed"), nullptr);
    EXPECT_EQ(algorithm_named(""), nullptr);
}

// The operator's error names every algorithm, in the table's order.
TEST(Algorithms, AnUnknownNameListsEveryRow)
{
    auto zone = zone_of("leaky");
    ASSERT_TRUE(zone.error);

    std::size_t at = 0;

    for (const AlgorithmRow &row : kAlgorithms) {
        std::string quoted = "\"" + std::string(row.name) + "\"";
        std::size_t found = zone.error->text.find(quoted, at);

        EXPECT_NE(found, std::string::npos) << zone.error->text;
        at = found == std::string::npos ? at : found;
    }
}

TEST(Algorithms, ZonesWithoutAlgorithmAreSliding)
{
    auto zone = parse_zone_params({"z", "key=$k", "rate=10r/s"});

    ASSERT_FALSE(zone.error);
    EXPECT_EQ(row_of(zone.params.policy).name, "sliding");
}

// What the parser refuses follows the columns: bucket= and lease=.
TEST(Algorithms, ParametersFollowTheColumns)
{
    for (const AlgorithmRow &row : kAlgorithms) {
        SCOPED_TRACE(std::string(row.name));
        EXPECT_EQ(!zone_of(row.name, "bucket=100ms").error,
                  row.accepts_bucket);
        EXPECT_EQ(!zone_of(row.name, "lease=1m").error, row.accepts_leases);

        // Without bucket=, a zone that takes none has one, the window.
        auto zone = zone_of(row.name);
        ASSERT_FALSE(zone.error);
        const Policy &policy = zone.params.policy;
        EXPECT_EQ(policy.bucket_ms == policy.window_ms, !row.accepts_bucket);
    }
}

// Every function is there; a zone that takes no turns makes no request
// wait and reports no next_in; the limit the headers say is the status's.
TEST(Algorithms, ColumnsHoldTogether)
{
    for (const AlgorithmRow &row : kAlgorithms) {
        SCOPED_TRACE(std::string(row.name));
        ASSERT_NE(row.quota, nullptr);
        ASSERT_NE(row.window_s, nullptr);
        ASSERT_NE(row.bucket_arg, nullptr);
        ASSERT_NE(row.span, nullptr);
        ASSERT_NE(row.status, nullptr);
        ASSERT_NE(row.used, nullptr);
        ASSERT_NE(row.wait_ms, nullptr);
        ASSERT_NE(row.bucket_at, nullptr);

        // A call's periods, which a calendar zone's row reads.
        Policy policy{10, 60000, 60000, row.algorithm, 4,
                      {60000, 120000, 180000}};
        ZoneStatus status = row.status(policy, 3000000, 0, false, 0);

        EXPECT_EQ(status.limit, row.quota(policy));
        EXPECT_GE(row.window_s(policy, 0), 1u);
        EXPECT_GE(row.bucket_arg(policy), 1u);
        EXPECT_GE(row.span(policy), 1u);
        EXPECT_GT(row.bucket_at(policy, 0).end_ms, 0u);
        EXPECT_TRUE(row.interval_note.empty() || row.answers_interval);

        if (!row.takes_turns) {
            EXPECT_EQ(row.wait_ms(policy, 3000000, 1, 0), 0u);
            EXPECT_TRUE(row.counts_per_bucket);
        }
    }
}

// The rows' values where the algorithms differ.
TEST(Algorithms, WindowsAndGcraDiffer)
{
    Policy sliding{10, 60000, 1000, Algorithm::kSliding, 4};
    Policy fixed{10, 60000, 60000, Algorithm::kFixed, 4};
    Policy gcra{10, 60000, 60000, Algorithm::kGcra, 4};

    EXPECT_EQ(row_of(sliding).quota(sliding), 10u);
    EXPECT_EQ(row_of(sliding).span(sliding), 60u);
    EXPECT_EQ(row_of(fixed).span(fixed), 1u);
    EXPECT_EQ(row_of(gcra).quota(gcra), 5u);
    EXPECT_EQ(row_of(gcra).span(gcra), 5u);
    EXPECT_EQ(row_of(gcra).window_s(gcra, 0), 30u);
    EXPECT_EQ(row_of(sliding).window_s(sliding, 0), 60u);
    EXPECT_EQ(row_of(sliding).bucket_arg(sliding), 1000u);
    EXPECT_EQ(row_of(gcra).bucket_arg(gcra), 60000u);
    EXPECT_EQ(row_of(sliding).bucket_at(sliding, 61500).number, 61u);
    EXPECT_EQ(row_of(fixed).bucket_at(fixed, 61500).end_ms, 120000u);

    // 6 turns of 6 s ahead, the capacity of 5 passed: 30 s to wait past
    // the delay of 0, the request's own turn counted.
    EXPECT_EQ(row_of(gcra).wait_ms(gcra, 36000000, 1, 0), 30000u);
    EXPECT_EQ(row_of(gcra).used(gcra, 36000000), 6u);
    EXPECT_EQ(row_of(sliding).used(sliding, 7), 7u);

    EXPECT_FALSE(row_of(sliding).accepts_burst);
    EXPECT_FALSE(row_of(gcra).accepts_settles);
    EXPECT_TRUE(row_of(fixed).accepts_settles);
    EXPECT_TRUE(row_of(gcra).named_in_status);
    EXPECT_FALSE(row_of(sliding).named_in_status);
    EXPECT_FALSE(row_of(gcra).counts_per_bucket);
    EXPECT_FALSE(row_of(gcra).answers_interval);
    EXPECT_EQ(row_of(sliding).interval_note, "");
    EXPECT_EQ(row_of(fixed).interval_note,
              "fixed window: the count of its current window");
}

// A calendar zone is a fixed window made per call: its second and third
// arguments are its call's period ends; its window, reset and bucket are
// those of the period Redis's time is in.
TEST(Algorithms, CalendarZonesCountPeriods)
{
    Policy day{10, 86400000, 86400000, Algorithm::kCalendar, 0,
               {1000, 83801000, 170201000}};
    const AlgorithmRow &row = row_of(day);

    EXPECT_EQ(row.name, "calendar");
    EXPECT_TRUE(row.args_per_call);
    EXPECT_TRUE(row.named_in_status);
    EXPECT_TRUE(row.accepts_settles);
    EXPECT_TRUE(row.accepts_leases);
    EXPECT_FALSE(row.accepts_bucket);
    EXPECT_EQ(row.bucket_arg(day), 83801000u);
    EXPECT_EQ(row.span(day), 170201000u);
    EXPECT_EQ(row.window_s(day, 83800999), 83800u);
    EXPECT_EQ(row.window_s(day, 83801000), 86400u);
    EXPECT_EQ(row.status(day, 4, 83800999, false, 83800000).reset_ms, 1000u);
    EXPECT_EQ(row.bucket_at(day, 90000000).number, 170200999u);
    EXPECT_FALSE(row_of(Policy{1, 1000, 1000}).args_per_call);
}

}  // namespace
}  // namespace ratelimit
