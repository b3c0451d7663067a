#include "limits/deny_cache.hpp"

#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

// The cache is half a megabyte: keep it off the test's stack.
std::unique_ptr<DenyCache> make_cache()
{
    return std::make_unique<DenyCache>();
}

TEST(DenyCache, UnknownKeyIsNotDenied)
{
    auto cache = make_cache();
    EXPECT_EQ(cache->denied_for("rl:api:a", 1000), 0u);
}

TEST(DenyCache, DeniedUntilTheGivenTimeOnly)
{
    auto cache = make_cache();
    cache->deny("rl:api:a", 5000);

    EXPECT_EQ(cache->denied_for("rl:api:a", 1000), 4000u);
    EXPECT_EQ(cache->denied_for("rl:api:a", 4999), 1u);
    EXPECT_EQ(cache->denied_for("rl:api:a", 5000), 0u);
    EXPECT_EQ(cache->denied_for("rl:api:a", 9000), 0u);
}

TEST(DenyCache, AnswersTheResetRedisGave)
{
    auto cache = make_cache();
    cache->deny("rl:api:a", 5000, 1700000017);
    cache->deny("rl:api:b", 5000, 1700000099);

    std::uint64_t reset = 0;
    EXPECT_EQ(cache->denied_for("rl:api:a", 1000, &reset), 4000u);
    EXPECT_EQ(reset, 1700000017u);

    reset = 7;
    EXPECT_EQ(cache->denied_for("rl:api:a", 5000, &reset), 0u);
    EXPECT_EQ(reset, 7u);
}

TEST(DenyCache, OnlyTheExactKeyIsDenied)
{
    auto cache = make_cache();
    cache->deny("rl:api:a", 5000);

    EXPECT_EQ(cache->denied_for("rl:api:b", 1000), 0u);
    EXPECT_EQ(cache->denied_for("rl:api:a ", 1000), 0u);
    EXPECT_EQ(cache->denied_for("rl:api:", 1000), 0u);
    EXPECT_EQ(cache->denied_for("rl:other:a", 1000), 0u);
}

TEST(DenyCache, BinaryKeysCompareByteForByte)
{
    auto cache = make_cache();
    const std::string a("rl:ip:\x7f\x00\x00\x01", 10);
    const std::string b("rl:ip:\x7f\x00\x00\x02", 10);
    cache->deny(a, 5000);

    EXPECT_EQ(cache->denied_for(a, 1000), 4000u);
    EXPECT_EQ(cache->denied_for(b, 1000), 0u);
}

TEST(DenyCache, ALaterDenyReplacesTheExpiry)
{
    auto cache = make_cache();
    cache->deny("rl:api:a", 5000);
    cache->deny("rl:api:a", 3000);

    EXPECT_EQ(cache->denied_for("rl:api:a", 1000), 2000u);
}

// Many more keys than slots: colliding keys evict each other, and no key is
// ever reported denied unless it was denied itself.
TEST(DenyCache, CollisionsNeverDenyAnotherKey)
{
    auto cache = make_cache();
    const std::size_t keys = DenyCache::kSlots * 4;

    for (std::size_t i = 0; i < keys; i += 2) {
        cache->deny("rl:api:" + std::to_string(i), 10000);
    }

    std::size_t remembered = 0;

    for (std::size_t i = 0; i < keys; i++) {
        std::uint64_t ms = cache->denied_for("rl:api:" + std::to_string(i),
                                             1000);
        if (i % 2 == 1) {
            EXPECT_EQ(ms, 0u) << "key " << i << " was never denied";
        } else if (ms > 0) {
            EXPECT_EQ(ms, 9000u);
            remembered++;
        }
    }

    EXPECT_GT(remembered, 0u);
    EXPECT_LE(remembered, DenyCache::kSlots);
}

TEST(DenyCache, KeysLongerThanTheSlotAreNotCached)
{
    auto cache = make_cache();
    const std::string longest(DenyCache::kMaxKey, 'k');
    const std::string too_long(DenyCache::kMaxKey + 1, 'k');

    cache->deny(longest, 5000);
    cache->deny(too_long, 5000);

    EXPECT_EQ(cache->denied_for(longest, 1000), 4000u);
    EXPECT_EQ(cache->denied_for(too_long, 1000), 0u);
}

}  // namespace
}  // namespace ratelimit
