#include "report/metrics_text.hpp"

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

struct Fixture {
    ZoneMetrics zones[2] = {};
    WorkerLink workers[2] = {{LinkState::kUp, 3}, {LinkState::kDown, 0}};
    MetricsReport report = {};

    Fixture()
    {
        zones[0].name = "api";
        zones[0].limit = 10;
        zones[0].window_ms = 60000;
        zones[0].sum.decisions[0] = 7;
        zones[0].sum.decisions[1] = 2;
        zones[0].sum.check_us.buckets[0] = 4;
        zones[0].sum.check_us.buckets[3] = 5;
        zones[0].sum.check_us.sum = 2500;
        zones[0].sum.successes = 6;
        zones[0].sum.response_us = 30000;
        zones[0].sum.busy_us = 2000000;
        zones[0].sum.units[0] = 1200;
        zones[0].sum.units[3] = 35;
        zones[0].sum.settles[0] = 9;
        zones[0].sum.settles[2] = 1;
        zones[0].sum.override_changes[0] = 2;
        zones[0].sum.override_changes[1] = 1;
        zones[0].sum.local[1] = 4;
        zones[0].sum.bans = 3;
        zones[0].sum.banned_requests = 41;
        zones[1].name = "login.v2";
        zones[1].limit = 5;
        zones[1].window_ms = 1500;
        report.zones = zones;
        report.zone_count = 2;
        report.link.calls = 3;
        report.link.requests_per_call.buckets[1] = 3;
        report.link.requests_per_call.sum = 6;
        report.link.local_us = 1500000;
        report.workers = workers;
        report.worker_count = 2;
        report.server_version = "1.22.1";
    }
};

bool has(const std::string &text, const std::string &line)
{
    return text.find(line) != std::string::npos;
}

void expect_all(const std::string &text,
                std::initializer_list<std::string> lines)
{
    for (const std::string &line : lines) {
        EXPECT_TRUE(has(text, line)) << line;
    }
}

TEST(MetricsText, PrometheusNamesCountersWithTotal)
{
    Fixture f;
    std::string t = render_metrics(f.report, MetricsFormat::kPrometheus);

    EXPECT_TRUE(has(t, "# TYPE nginx_ratelimit_decisions_total counter\n"));
    EXPECT_TRUE(has(t, "nginx_ratelimit_decisions_total{zone=\"api\","
                       "decision=\"passed\"} 7\n"));
    EXPECT_TRUE(has(t, "nginx_ratelimit_decisions_total{zone=\"login.v2\","
                       "decision=\"error_rejected\"} 0\n"));
    EXPECT_TRUE(has(t, "nginx_ratelimit_zone_window_seconds{zone=\"login.v2\"}"
                       " 1.500\n"));
    EXPECT_TRUE(has(t, "nginx_ratelimit_busy_seconds_total{zone=\"api\"} "
                       "2.000000\n"));
    EXPECT_TRUE(has(t, "nginx_ratelimit_units_total{zone=\"api\","
                       "event=\"settle_returned\"} 35\n"));
    EXPECT_TRUE(has(t, "nginx_ratelimit_settles_total{zone=\"login.v2\","
                       "outcome=\"dropped\"} 0\n"));
    EXPECT_TRUE(has(t, "nginx_ratelimit_settles_total{zone=\"api\","
                       "outcome=\"unknown\"} 1\n"));
    EXPECT_TRUE(has(t, "nginx_ratelimit_override_changes_total{zone=\"api\","
                       "change=\"removed\"} 1\n"));
    EXPECT_TRUE(has(t, "nginx_ratelimit_local_decisions_total{zone=\"api\","
                       "decision=\"rejected\"} 4\n"));
    EXPECT_TRUE(has(t, "nginx_ratelimit_local_seconds_total 1.500000\n"));
    EXPECT_FALSE(has(t, "# EOF"));
}

// Histograms cumulative, with count and sum; worker gauges; build info.
TEST(MetricsText, HistogramsGaugesAndBuildInfo)
{
    Fixture f;
    std::string t = render_metrics(f.report, MetricsFormat::kPrometheus);
    std::string p = "nginx_ratelimit_check_duration_seconds_";
    std::string s = "nginx_ratelimit_redis_connection_state";

    expect_all(t, {p + "bucket{zone=\"api\",le=\"0.0001\"} 4\n",
                   p + "bucket{zone=\"api\",le=\"0.0005\"} 4\n",
                   p + "bucket{zone=\"api\",le=\"0.001\"} 9\n",
                   p + "bucket{zone=\"api\",le=\"+Inf\"} 9\n",
                   p + "count{zone=\"api\"} 9\n",
                   p + "sum{zone=\"api\"} 0.002500\n",
                   "nginx_ratelimit_redis_requests_per_call_sum 6\n",
                   s + "{worker=\"0\",state=\"up\"} 1\n",
                   s + "{worker=\"0\",state=\"down\"} 0\n",
                   s + "{worker=\"1\",state=\"down\"} 1\n",
                   "nginx_ratelimit_redis_requests_waiting{worker=\"0\"} 3\n",
                   "nginx_ratelimit_build_info{version=\""
                       + std::string(kModuleVersion)
                       + "\",nginx=\"1.22.1\"} 1\n"});
}

TEST(MetricsText, OpenMetricsNamesFamiliesWithoutTotalAndEnds)
{
    Fixture f;
    std::string t = render_metrics(f.report, MetricsFormat::kOpenMetrics);

    EXPECT_TRUE(has(t, "# TYPE nginx_ratelimit_decisions counter\n"));
    EXPECT_TRUE(has(t, "nginx_ratelimit_redis_calls_total 3\n"));
    EXPECT_EQ(t.substr(t.size() - 6), "# EOF\n");
}

TEST(MetricsText, JsonComputesRateAndMeanResponseTime)
{
    Fixture f;
    std::string t = render_metrics(f.report, MetricsFormat::kJson);

    EXPECT_TRUE(has(t, "\"limit_reqs\":{\"api\":{\"passed\":7,"
                       "\"rejected\":2,"));
    // 6 successes in 2 s busy; 30 ms over 6.
    EXPECT_TRUE(has(t, "\"requests_per_second\":3.000"));
    EXPECT_TRUE(has(t, "\"mean_response_time\":0.005000"));
    EXPECT_TRUE(has(t, "\"login.v2\":{\"passed\":0,"));
    EXPECT_TRUE(has(t, "\"requests_per_second\":0.000,"
                       "\"mean_response_time\":0.000000,\"units\":"));
    EXPECT_TRUE(has(t, "\"units\":{\"admitted\":1200,\"rejected\":0,"
                       "\"settle_added\":0,\"settle_returned\":35},"
                       "\"settles\":{\"applied\":9,\"dropped\":0,"
                       "\"unknown\":1,\"failed\":0},"
                       "\"override_changes\":{\"set\":2,\"removed\":1},"
                       "\"local\":{\"passed\":0,\"rejected\":4},"
                       "\"bans\":3,\"banned_requests\":41}"));
    EXPECT_TRUE(has(t, "\"local_seconds\":1.500000,\"workers\":"));
    EXPECT_TRUE(has(t, "\"workers\":[{\"state\":\"up\",\"requests_waiting\":3},"
                       "{\"state\":\"down\",\"requests_waiting\":0}]"));
}

// Bans set and requests refused by a ban, per rate zone.
TEST(MetricsText, BansOfRateZones)
{
    Fixture f;
    std::string t = render_metrics(f.report, MetricsFormat::kPrometheus);

    expect_all(t, {"# TYPE nginx_ratelimit_bans_total counter\n",
                   "nginx_ratelimit_bans_total{zone=\"api\"} 3\n",
                   "nginx_ratelimit_bans_total{zone=\"login.v2\"} 0\n",
                   "nginx_ratelimit_banned_requests_total{zone=\"api\"} 41\n",
                   "nginx_ratelimit_banned_requests_total{zone=\"login.v2\"} "
                   "0\n"});
}

// A GCRA zone's delays, and only a GCRA zone's.
TEST(MetricsText, DelaysOfGcraZones)
{
    Fixture f;
    f.zones[1].takes_turns = true;
    f.zones[1].sum.delayed = 3;
    f.zones[1].sum.delay_us.buckets[1] = 3;
    f.zones[1].sum.delay_us.sum = 12000;
    std::string t = render_metrics(f.report, MetricsFormat::kPrometheus);

    expect_all(t, {"nginx_ratelimit_delayed_total{zone=\"login.v2\"} 3\n",
                   "nginx_ratelimit_delay_seconds_bucket{zone=\"login.v2\","
                   "le=\"0.005\"} 3\n",
                   "nginx_ratelimit_delay_seconds_sum{zone=\"login.v2\"} "
                   "0.012000\n"});
    EXPECT_FALSE(has(t, "nginx_ratelimit_delayed_total{zone=\"api\"}"));

    std::string j = render_metrics(f.report, MetricsFormat::kJson);
    EXPECT_TRUE(has(j, "\"delayed\":3,\"delay\":{\"count\":3,"));
}

// A calendar zone's object names its type, period and time zone.
TEST(MetricsText, JsonNamesCalendarZones)
{
    Fixture f;
    f.zones[1].type = "calendar";
    f.zones[1].period = "month";
    f.zones[1].tz = "Europe/Berlin";
    f.zones[1].window_ms = 2592000000;
    std::string j = render_metrics(f.report, MetricsFormat::kJson);

    EXPECT_TRUE(has(j, "\"limit\":5,\"window\":2592000.000,"
                       "\"type\":\"calendar\",\"period\":\"month\","
                       "\"tz\":\"Europe/Berlin\",\"check_duration\":"));
    EXPECT_FALSE(has(j, "\"window\":60.000,\"type\""));
}

TEST(MetricsText, FormatFromArgumentThenAccept)
{
    EXPECT_EQ(choose_metrics_format("json", ""), MetricsFormat::kJson);
    EXPECT_EQ(choose_metrics_format("", "application/openmetrics-text; "
                                        "version=1.0.0,text/plain;q=0.5"),
              MetricsFormat::kOpenMetrics);
    EXPECT_EQ(choose_metrics_format("prometheus",
                                    "application/openmetrics-text"),
              MetricsFormat::kPrometheus);
    EXPECT_EQ(choose_metrics_format("", "*/*"), MetricsFormat::kPrometheus);
}

// q=0 means "not acceptable" (RFC 9110); the higher quality wins.
TEST(MetricsText, FormatFromAcceptQuality)
{
    EXPECT_EQ(choose_metrics_format("", "application/openmetrics-text;q=0"),
              MetricsFormat::kPrometheus);
    EXPECT_EQ(choose_metrics_format("", "application/openmetrics-text; "
                                        "version=1.0.0; q=0.000, */*"),
              MetricsFormat::kPrometheus);
    EXPECT_EQ(choose_metrics_format("", "text/plain;q=0.9, "
                                        "application/openmetrics-text;q=0.5"),
              MetricsFormat::kPrometheus);
    EXPECT_EQ(choose_metrics_format("", "application/openmetrics-text;"
                                        "version=1.0.0;q=0.5,application/"
                                        "openmetrics-text;q=0.4,text/plain;"
                                        "version=0.0.4;q=0.3,*/*;q=0.2"),
              MetricsFormat::kOpenMetrics);
    EXPECT_EQ(choose_metrics_format("", "application/openmetrics-text;q=x"),
              MetricsFormat::kPrometheus);
    EXPECT_EQ(choose_metrics_format("", "application/openmetrics-text;"
                                        "q=1.0"),
              MetricsFormat::kOpenMetrics);
}

}  // namespace
}  // namespace ratelimit
