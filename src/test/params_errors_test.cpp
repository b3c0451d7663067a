// Every bad parameter of ratelimit_zone and ratelimit_redis the parsers
// know, with the exact text nginx prints for it and the token it is about.
#include "params/redis_params.hpp"
#include "params/zone_params.hpp"

#include <cstddef>
#include <iterator>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

// BadCase::token of an error about no token but the directive's whole.
constexpr std::size_t kWhole = ~std::size_t{0};

struct BadCase {
    ParamTokens args;
    const char *text;
    std::size_t token;
};

const BadCase kBadZones[] = {
    // t/00-config.t
    {{"api", "key=$a", "rate=0r/s"},
     "invalid rate \"0r/s\": use Nr/s, Nr/m, Nr/h or Nr/d with N > 0", kWhole},
    {{"api", "key=$a", "limit=10", "window=1s", "bucket=300ms"},
     "bucket \"300ms\" does not divide the window of 1000 ms into whole "
     "buckets", kWhole},
    {{"api", "key=$a", "rate=10r/s", "foo=bar"},
     "invalid parameter \"foo=bar\"", 3},
    {{"api", "rate=10r/s"},
     "no \"key=\" is defined for ratelimit_zone \"api\"",
     kWhole},
    {{"api", "key=", "rate=10r/s"},
     "no \"key=\" is defined for ratelimit_zone \"api\"", kWhole},
    {{"api", "key=$a"},
     "ratelimit_zone \"api\" needs \"rate=\", or both \"limit=\" and "
     "\"window=\"", kWhole},
    {{"api", "key=$a", "limit=5"},
     "ratelimit_zone \"api\" needs \"rate=\", or both \"limit=\" and "
     "\"window=\"", kWhole},
    {{"api", "key=$a", "limit=0", "window=1s"}, "invalid limit \"0\"", kWhole},
    {{"api", "key=$a", "rate=10r/x"},
     "invalid rate \"10r/x\": use Nr/s, Nr/m, Nr/h or Nr/d with N > 0",
     kWhole},
    // names
    {{"a#b", "key=$a", "rate=1r/s"},
     "invalid zone name \"a#b\": use letters, digits, \"_\", \"-\" and "
     "\".\"", 0},
    {{"a+b", "key=$a", "rate=1r/s"},
     "invalid zone name \"a+b\": use letters, digits, \"_\", \"-\" and "
     "\".\"", 0},
    {{"key=$a", "rate=1r/s"},
     "invalid zone name \"key=$a\": use letters, digits, \"_\", \"-\" and "
     "\".\"", 0},
    // the loop: unknown, another kind's, duplicate, before any value
    {{"api", "key=$a", "rate=1r/s", "key=$b"},
     "duplicate parameter \"key=$b\"", 3},
    {{"api", "key=$a", "rate=x", "rate=1r/s"},
     "duplicate parameter \"rate=1r/s\"", 3},
    {{"api", "key=$a", "rate=1r/s", "queue=1"},
     "\"queue=\" is for concurrency zones (concurrency=); \"api\" is a "
     "rate zone", 3},
    {{"api", "key=$a", "rate=1r/s", "lease=1m", "queue=x"},
     "\"queue=\" is for concurrency zones (concurrency=); \"api\" is a "
     "rate zone", 4},
    {{"api", "key=$a", "rate=1r/s", "lease=1s"},
     "invalid lease \"1s\": a rate zone's lease= is the shared memory of "
     "its quota leases, at least 32k, such as 1m", kWhole},
    {{"api", "key=$a", "rate=1r/s", "dry_run"},
     "invalid parameter \"dry_run\"", 3},
    {{"api", "key=$a", "rate=1r/s", "ban=500ms"},
     "invalid ban \"500ms\": whole seconds from 1s to 365d, such as 15m "
     "or 1h", kWhole},
    {{"api", "key=$a", "rate=1r/s", "ban=1500ms"},
     "invalid ban \"1500ms\": whole seconds from 1s to 365d, such as 15m "
     "or 1h", kWhole},
    {{"api", "key=$a", "rate=1r/s", "ban=366d"},
     "invalid ban \"366d\": whole seconds from 1s to 365d, such as 15m "
     "or 1h", kWhole},
    {{"api", "key=$a", "rate=1r/s", "ban=1h", "lease=1m"},
     "\"ban=\" cannot go with \"lease=\": a lease admits requests without "
     "asking Redis, so a ban would not stop other servers' leases at once",
     kWhole},
    {{"api", "key=$a", "concurrency=1", "ban=1h"},
     "\"ban=\" is for rate zones; \"api\" is a concurrency zone "
     "(concurrency=)", 3},
    {{"api", "key=$a", "rate=1r/s", "top=7"},
     "invalid top \"7\": the counters of the zone's top subjects, 8 to "
     "1024, or off", kWhole},
    {{"api", "key=$a", "rate=1r/s", "top=on"},
     "invalid top \"on\": the counters of the zone's top subjects, 8 to "
     "1024, or off", kWhole},
    {{"api", "key=$a", "concurrency=1", "top=8"},
     "\"top=\" is for rate zones; \"api\" is a concurrency zone "
     "(concurrency=)", 3},
    {{"api", "rate=0r/s", "KEY=$a"}, "invalid parameter \"KEY=$a\"", 2},
    {{"api", "key=$a", "concurrency=1", "rate=1r/s"},
     "\"rate=\" is for rate zones; \"api\" is a concurrency zone "
     "(concurrency=)", 3},
    {{"api", "key=$a", "window=1s", "concurrency=1"},
     "\"window=\" is for rate zones; \"api\" is a concurrency zone "
     "(concurrency=)", 2},
    {{"api", "key=$a", "concurrency=1", "rate"},
     "invalid parameter \"rate\"", 3},
    {{"api", "key=$a", "concurrency=1", "concurrency=2"},
     "duplicate parameter \"concurrency=2\"", 3},
    // rate zones' values, in the order they are checked
    {{"api", "key=$a", "rate=1r/s", "limit=1"},
     "\"rate=\" cannot be combined with \"limit=\" or \"window=\"", kWhole},
    {{"api", "key=$a", "rate=1r/s", "window=1s"},
     "\"rate=\" cannot be combined with \"limit=\" or \"window=\"", kWhole},
    {{"api", "key=$a", "rate="},
     "invalid rate \"\": use Nr/s, Nr/m, Nr/h or Nr/d with N > 0", kWhole},
    {{"api", "key=$a", "limit=9007199254740993", "window=1s"},
     "invalid limit \"9007199254740993\"", kWhole},
    {{"api", "key=$a", "limit=x", "window=y"}, "invalid limit \"x\"", kWhole},
    {{"api", "key=$a", "limit=1", "window=0s"},
     "invalid window \"0s\"", kWhole},
    {{"api", "key=$a", "limit=1", "window=1y"},
     "invalid window \"1y\"", kWhole},
    {{"api", "key=$a", "limit=1", "window=1000001w"},
     "invalid window \"1000001w\": at most 1000000w", kWhole},
    {{"api", "key=$a", "limit=1", "window=1000000w1ms"},
     "invalid window \"1000000w1ms\": at most 1000000w", kWhole},
    {{"api", "key=$a", "limit=1", "window=15250000w"},
     "invalid window \"15250000w\": at most 1000000w", kWhole},
    // limits from variables
    {{"api", "key=$a", "rate=$r"},
     "ratelimit_zone \"api\" needs \"window=\" with a variable in "
     "\"rate=\"", kWhole},
    {{"api", "key=$a", "rate=$r", "bucket=1s"},
     "ratelimit_zone \"api\" needs \"window=\" with a variable in "
     "\"rate=\"", kWhole},
    {{"api", "key=$a", "rate=$r", "limit=5", "window=1s"},
     "\"rate=\" cannot be combined with \"limit=\"", kWhole},
    {{"api", "key=$a", "rate=$r", "limit=$l", "window=1s"},
     "\"rate=\" cannot be combined with \"limit=\"", kWhole},
    {{"api", "key=$a", "rate=1r/s", "limit=$l"},
     "\"rate=\" cannot be combined with \"limit=\" or \"window=\"", kWhole},
    {{"api", "key=$a", "limit=$l"},
     "ratelimit_zone \"api\" needs \"rate=\", or both \"limit=\" and "
     "\"window=\"", kWhole},
    {{"api", "key=$a", "limit=1$l", "window=1s"}, "invalid limit \"1$l\"",
     kWhole},
    {{"api", "key=$a", "limit=$l", "window=x"}, "invalid window \"x\"",
     kWhole},
    {{"api", "key=$a", "rate=$r", "window=1000001w"},
     "invalid window \"1000001w\": at most 1000000w", kWhole},
    {{"api", "key=$a", "limit=$l", "window=1s", "bucket=300ms"},
     "bucket \"300ms\" does not divide the window of 1000 ms into whole "
     "buckets", kWhole},
    {{"api", "key=$a", "rate=1r/s", "algorithm=leaky"},
     "invalid algorithm \"leaky\": use \"sliding\", \"fixed\", "
     "\"gcra\" or \"calendar\"", kWhole},
    {{"api", "key=$a", "rate=1r/s", "algorithm=Fixed"},
     "invalid algorithm \"Fixed\": use \"sliding\", \"fixed\", "
     "\"gcra\" or \"calendar\"", kWhole},
    {{"api", "key=$a", "rate=1r/s", "algorithm=fixed", "bucket=100ms"},
     "\"bucket=\" applies to sliding windows only", kWhole},
    {{"api", "key=$a", "rate=1r/s", "algorithm=gcra", "bucket=100ms"},
     "\"bucket=\" applies to sliding windows only", kWhole},
    {{"api", "key=$a", "rate=1r/s", "bucket=0ms"},
     "invalid bucket \"0ms\"", kWhole},
    {{"api", "key=$a", "rate=1r/s", "bucket=2s"},
     "bucket \"2s\" does not divide the window of 1000 ms into whole "
     "buckets", kWhole},
    {{"api", "rate=1r/s", "algorithm=x"},
     "invalid algorithm \"x\": use \"sliding\", \"fixed\", "
     "\"gcra\" or \"calendar\"", kWhole},
    // calendar windows
    {{"api", "key=$a", "limit=1", "window=month", "algorithm=gcra"},
     "window=month counts calendar periods, a fixed window: algorithm "
     "\"gcra\" cannot; leave out \"algorithm=\" or give \"fixed\"", kWhole},
    {{"api", "key=$a", "limit=1", "window=day", "algorithm=sliding"},
     "window=day counts calendar periods, a fixed window: algorithm "
     "\"sliding\" cannot; leave out \"algorithm=\" or give \"fixed\"",
     kWhole},
    {{"api", "key=$a", "limit=1", "window=day", "algorithm=leaky"},
     "invalid algorithm \"leaky\": use \"sliding\", \"fixed\", "
     "\"gcra\" or \"calendar\"", kWhole},
    {{"api", "key=$a", "limit=1", "window=1d", "algorithm=calendar"},
     "algorithm \"calendar\" needs window=day, week, month or year",
     kWhole},
    {{"api", "key=$a", "limit=1", "window=1d", "tz=Europe/Berlin"},
     "\"tz=\" applies to calendar windows only: window=day, week, month "
     "or year", kWhole},
    {{"api", "key=$a", "rate=1r/s", "start=mon"},
     "\"start=\" applies to calendar windows only: window=day, week, "
     "month or year", kWhole},
    {{"api", "key=$a", "rate=$r", "window=month"},
     "window=month takes limit=N or limit=$NAME, not \"rate=\": a "
     "calendar period has no rate", kWhole},
    {{"api", "key=$a", "window=week"},
     "ratelimit_zone \"api\" needs \"limit=\" with window=week", kWhole},
    {{"api", "key=$a", "limit=0", "window=day"}, "invalid limit \"0\"",
     kWhole},
    {{"api", "key=$a", "limit=1", "window=day", "bucket=1h"},
     "\"bucket=\" applies to sliding windows only", kWhole},
    {{"api", "key=$a", "limit=1", "window=month", "start=32"},
     "invalid start \"32\": a month starts on a day 1 to 31", kWhole},
    {{"api", "key=$a", "limit=1", "window=week", "start=monday"},
     "invalid start \"monday\": a week starts on mon, tue, wed, thu, fri, "
     "sat or sun", kWhole},
    {{"api", "key=$a", "limit=1", "window=day", "start=24:00"},
     "invalid start \"24:00\": a day starts at HH:MM, 00:00 to 23:59",
     kWhole},
    {{"api", "key=$a", "limit=1", "window=year", "start=02-30"},
     "invalid start \"02-30\": a year starts on a date MM-DD, 01-01 to "
     "12-31", kWhole},
    {{"api", "key=$a", "limit=1", "window=month", "tz=../../etc/passwd"},
     "invalid tz \"../../etc/passwd\": use a time zone of the tz "
     "database, such as Europe/Berlin or UTC", kWhole},
    {{"api", "key=$a", "limit=1", "window=month", "tz="},
     "invalid tz \"\": use a time zone of the tz database, such as "
     "Europe/Berlin or UTC", kWhole},
    {{"api", "key=$a", "limit=1", "window=day", "tz=UTC", "tz=UTC"},
     "duplicate parameter \"tz=UTC\"", 5},
    {{"api", "key=$a", "concurrency=1", "tz=UTC"},
     "\"tz=\" is for rate zones; \"api\" is a concurrency zone "
     "(concurrency=)", 3},
    // concurrency zones' values, in the order they are checked
    {{"api", "key=$a", "concurrency=0"}, "invalid concurrency \"0\"", kWhole},
    {{"api", "key=$a", "concurrency="}, "invalid concurrency \"\"", kWhole},
    {{"api", "key=$a", "concurrency=x", "queue=x"},
     "invalid concurrency \"x\"", kWhole},
    {{"api", "key=$a", "concurrency=1", "queue=-1"},
     "invalid queue \"-1\"", kWhole},
    {{"api", "key=$a", "concurrency=1", "queue=00"},
     "invalid queue \"00\"", kWhole},
    {{"api", "key=$a", "concurrency=1", "queue_timeout=0"},
     "invalid queue_timeout \"0\"", kWhole},
    {{"api", "key=$a", "concurrency=1", "lease=299ms"},
     "invalid lease \"299ms\": at least 300 ms, at most 24h", kWhole},
    {{"api", "key=$a", "concurrency=1", "lease=x"},
     "invalid lease \"x\": at least 300 ms, at most 24h", kWhole},
    {{"api", "key=$a", "concurrency=1", "lease=25h"},
     "invalid lease \"25h\": at least 300 ms, at most 24h", kWhole},
    {{"api", "key=$a", "concurrency=1", "queue_timeout=1441m"},
     "invalid queue_timeout \"1441m\": at most 24h", kWhole},
    {{"api", "concurrency=1"},
     "no \"key=\" is defined for ratelimit_zone \"api\"", kWhole},
};

const BadCase kBadRedis[] = {
    // t/00-config.t, t/28-redis-config.t
    {{"127.0.0.1:1", "foo=bar"}, "invalid parameter \"foo=bar\"", 1},
    {{"127.0.0.1:1", "sentinel_user=su", "sentinel_password=sp"},
     "\"sentinel_user=\" and \"sentinel_password=\" require \"sentinel=\"",
     kWhole},
    {{"127.0.0.1:1", "127.0.0.1:2"},
     "ratelimit_redis takes one address, the addresses of sentinels with "
     "\"sentinel=\", or seed nodes after \"cluster\"", kWhole},
    // values, checked as read
    {{"a:1", "db=-1"}, "invalid parameter \"db=-1\"", 1},
    {{"a:1", "db="}, "invalid parameter \"db=\"", 1},
    {{"a:1", "db=9223372036854775808"},
     "invalid parameter \"db=9223372036854775808\"", 1},
    {{"a:1", "db=1", "db=2"}, "duplicate parameter \"db=2\"", 2},
    {{"a:1", "db=x", "db=2"}, "invalid parameter \"db=x\"", 1},
    {{"a:1", "user="}, "invalid parameter \"user=\"", 1},
    {{"a:1", "password="}, "invalid parameter \"password=\"", 1},
    {{"a:1", "password_file="}, "invalid parameter \"password_file=\"", 1},
    {{"a:1", "sentinel="}, "invalid parameter \"sentinel=\"", 1},
    {{"a:1", "sentinel_user="}, "invalid parameter \"sentinel_user=\"", 1},
    {{"a:1", "sentinel_password="}, "invalid parameter \"sentinel_password=\"",
     1},
    {{"a:1", "password=a", "password=a"},
     "duplicate parameter \"password=a\"", 2},
    {{"a:1", "timeout=0"}, "invalid parameter \"timeout=0\"", 1},
    {{"a:1", "timeout=1x"}, "invalid parameter \"timeout=1x\"", 1},
    {{"a:1", "timeout=1s", "timeout=x"},
     "duplicate parameter \"timeout=x\"", 2},
    {{"a:1", "connect_timeout=-1s"},
     "invalid parameter \"connect_timeout=-1s\"", 1},
    {{"a:1", "Timeout=1s"}, "invalid parameter \"Timeout=1s\"", 1},
    {{"a:1", "cross_slot"}, "\"cross_slot\" requires \"cluster\"", 1},
    // "cluster" after an address, "sentinel" without its name
    {{"a:1", "cluster", "cross_slot"},
     "\"cluster\" must come first: ratelimit_redis cluster ADDRESS ...", 2},
    {{"cluster", "a:1", "cross_slot", "cross_slot"},
     "duplicate parameter \"cross_slot\"", 3},
    {{"cluster", "a:1", "fleet_secret_file="},
     "invalid parameter \"fleet_secret_file=\"", 2},
    // combinations, once all is read
    {{}, "ratelimit_redis needs an address", kWhole},
    {{"db=1"}, "ratelimit_redis needs an address", kWhole},
    {{"cluster"}, "ratelimit_redis cluster needs the address of a seed node",
     kWhole},
    {{"cluster", "a:1", "db=0"},
     "\"cluster\" cannot be combined with \"sentinel=\" or \"db=\": a "
     "cluster has one database and no sentinels", kWhole},
    {{"cluster", "a:1", "sentinel=m"},
     "\"cluster\" cannot be combined with \"sentinel=\" or \"db=\": a "
     "cluster has one database and no sentinels", kWhole},
    {{"a:1", "sentinel=m", "sentinel_user=u"},
     "\"sentinel_user=\" requires \"sentinel_password=\"", kWhole},
    {{"a:1", "password=p", "password_file=f"},
     "\"password=\" and \"password_file=\" cannot be combined", kWhole},
    {{"a:1", "user=u"},
     "\"user=\" requires \"password=\" or \"password_file=\"",
     kWhole},
    {{"127.0.0.1:7000", "cluster"},
     "\"cluster\" must come first: ratelimit_redis cluster ADDRESS ...",
     kWhole},
    {{"a:1", "b:2", "cluster", "timeout=1s"},
     "\"cluster\" must come first: ratelimit_redis cluster ADDRESS ...",
     kWhole},
    {{"a:26379", "b:26379", "sentinel"},
     "\"sentinel\" needs the master's name: sentinel=NAME", kWhole},
    {{"sentinel", "a:26379"},
     "\"sentinel\" needs the master's name: sentinel=NAME", kWhole},
};

template <typename Parse, std::size_t N>
void expect_refused(Parse parse, const BadCase (&cases)[N])
{
    for (const BadCase &c : cases) {
        auto result = parse(c.args);
        ASSERT_TRUE(result.error.has_value()) << c.text;
        EXPECT_EQ(result.error->text, c.text);
        EXPECT_EQ(result.error->token,
                  c.token == kWhole ? c.args.size() : c.token);
    }
}

TEST(ParseZoneParams, RefusesWithNginxText)
{
    expect_refused(parse_zone_params, kBadZones);
}

TEST(ParseRedisParams, RefusesWithNginxText)
{
    expect_refused(parse_redis_params, kBadRedis);
}

}  // namespace
}  // namespace ratelimit
