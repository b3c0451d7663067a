#include "limits/deny_cache.hpp"

#include <cstdint>
#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

// The limit the requests of these tests are rejected at and carry.
constexpr std::int64_t kLimit = DenyCache::room(10, 1);

// When the calls of these tests were sent, where it does not matter: no
// key was forgotten.
constexpr std::uint64_t kSent = 0;

// The cache is over half a megabyte: keep it off the test's stack.
std::unique_ptr<DenyCache> make_cache()
{
    return std::make_unique<DenyCache>();
}

TEST(DenyCache, UnknownKeyIsNotDenied)
{
    auto cache = make_cache();
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 1000), 0u);
}

// Forgetting a key, remembered or not, leaves a tombstone, which is no
// rejection: whatever the time and the room asked, the key is not denied,
// while another key's rejection is live.
TEST(DenyCache, ForgetDropsOnlyThatKey)
{
    auto cache = make_cache();
    cache->deny("rl:api:a", kLimit, kSent, 5000);
    cache->deny("rl:api:b", kLimit, kSent, 5000);
    cache->forget("rl:api:a", 100);
    cache->forget("rl:api:c", 100);

    for (const char *key : {"rl:api:a", "rl:api:c"}) {
        for (std::uint64_t now : {0, 99, 100, 101, 1000, 4999}) {
            EXPECT_EQ(cache->denied_for(key, INT64_MIN, now), 0u)
                << key << " at " << now;
        }
    }

    EXPECT_EQ(cache->denied_for("rl:api:b", kLimit, 1000), 4000u);
    cache->clear(50);
    EXPECT_EQ(cache->denied_for("rl:api:b", kLimit, 1000), 0u);
}

// The race of a forgiving (or an override raised) with a call in flight:
// a call sent at 90, rejected by Redis before the subject was forgiven,
// whose reply comes after this worker forgot it at 100.  That rejection
// no longer holds: not remembered.  Nor is that of a call sent at 100,
// which may have left before the forgetting in that millisecond.  A call
// sent after it is remembered, and a late reply of one sent before does
// not replace it.  Other keys are remembered as ever.
TEST(DenyCache, NoRejectionOfACallSentBeforeTheKeyWasForgotten)
{
    auto cache = make_cache();
    cache->deny("rl:api:a", kLimit, 80, 5000);
    cache->deny("rl:api:b", kLimit, 80, 5000);
    cache->forget("rl:api:a", 100);

    cache->deny("rl:api:a", kLimit, 90, 5000);
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 1000), 0u);
    cache->deny("rl:api:a", kLimit, 100, 5000);
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 1000), 0u);

    EXPECT_EQ(cache->denied_for("rl:api:b", kLimit, 1000), 4000u);
    cache->deny("rl:api:c", kLimit, 90, 5000);
    EXPECT_EQ(cache->denied_for("rl:api:c", kLimit, 1000), 4000u);

    cache->deny("rl:api:a", kLimit, 101, 6000);
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 1000), 5000u);
    cache->deny("rl:api:a", kLimit, 90, 9000);
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 1000), 5000u);

    // Forgotten again: no rejection, until one of a call sent after.
    cache->forget("rl:api:a", 200);
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 1000), 0u);
    cache->deny("rl:api:a", kLimit, 150, 5000);
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 1000), 0u);
    cache->deny("rl:api:a", kLimit, 201, 5000);
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 1000), 4000u);
}

// A tombstone goes as any entry does: a rejection of another key in its
// slot replaces it.  clear() forgets every key at once: no rejection of a
// call sent until then is remembered, one sent after is.
TEST(DenyCache, ATombstoneGoesAsAnyEntry)
{
    auto cache = make_cache();

    // A key in the slot of "rl:api:a": the one whose rejection evicts a's.
    std::string other;
    for (int i = 0; other.empty(); i++) {
        std::string key = "rl:api:" + std::to_string(i);
        cache->deny("rl:api:a", kLimit, kSent, 5000);
        cache->deny(key, kLimit, kSent, 5000);
        if (key != "rl:api:a"
            && cache->denied_for("rl:api:a", kLimit, 1000) == 0)
        {
            other = key;
        }
    }

    cache->forget("rl:api:a", 100);
    cache->deny(other, kLimit, 90, 5000);
    EXPECT_EQ(cache->denied_for(other, kLimit, 1000), 4000u);
    cache->deny("rl:api:a", kLimit, 90, 5000);
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 1000), 4000u);

    cache->clear(200);
    cache->deny("rl:api:a", kLimit, 150, 5000);
    cache->deny(other, kLimit, 200, 5000);
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 1000), 0u);
    EXPECT_EQ(cache->denied_for(other, kLimit, 1000), 0u);
    cache->deny("rl:api:a", kLimit, 201, 5000);
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 1000), 4000u);
}

TEST(DenyCache, DeniedUntilTheGivenTimeOnly)
{
    auto cache = make_cache();
    cache->deny("rl:api:a", kLimit, kSent, 5000);

    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 1000), 4000u);
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 4999), 1u);
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 5000), 0u);
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 9000), 0u);
}

TEST(DenyCache, AnswersTheResetRedisGave)
{
    auto cache = make_cache();
    cache->deny("rl:api:a", kLimit, kSent, 5000, 1700000017);
    cache->deny("rl:api:b", kLimit, kSent, 5000, 1700000099);

    std::uint64_t reset = 0;
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 1000, &reset), 4000u);
    EXPECT_EQ(reset, 1700000017u);

    reset = 7;
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 5000, &reset), 0u);
    EXPECT_EQ(reset, 7u);
}

// The quota a rejection was made under (a subject's override's) is
// answered with it; none given, kNoQuota.
TEST(DenyCache, AnswersTheQuotaItWasRejectedUnder)
{
    auto cache = make_cache();
    cache->deny("rl:api:a", kLimit, kSent, 5000, 1700000017, 3);
    cache->deny("rl:api:b", kLimit, kSent, 5000, 1700000017);

    std::uint64_t reset = 0;
    std::uint64_t quota = 0;
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 1000, &reset, &quota),
              4000u);
    EXPECT_EQ(quota, 3u);
    EXPECT_EQ(cache->denied_for("rl:api:b", kLimit, 1000, &reset, &quota),
              4000u);
    EXPECT_EQ(quota, DenyCache::kNoQuota);
}

// A ban answers a request of any room, and says it is one; a rejection by
// a limit does not answer a request asked with kBanRoom (a zone whose
// plain rejections are never remembered asks so), nor says it is a ban.
TEST(DenyCache, ABanAnswersEveryRoom)
{
    auto cache = make_cache();
    cache->deny("rl:login:a", DenyCache::kBanRoom, kSent, 3600000);
    cache->deny("rl:login:b", kLimit, kSent, 5000);
    bool banned = false;

    EXPECT_EQ(cache->denied_for("rl:login:a", DenyCache::kBanRoom, 1000,
                                nullptr, nullptr, &banned), 3599000u);
    EXPECT_TRUE(banned);
    EXPECT_EQ(cache->denied_for("rl:login:a", DenyCache::room(1u << 30, 0),
                                1000), 3599000u);
    EXPECT_EQ(cache->denied_for("rl:login:b", DenyCache::kBanRoom, 1000), 0u);
    EXPECT_EQ(cache->denied_for("rl:login:b", kLimit, 1000, nullptr, nullptr,
                                &banned), 4000u);
    EXPECT_FALSE(banned);
    cache->forget("rl:login:a", 2000);
    EXPECT_EQ(cache->denied_for("rl:login:a", kLimit, 2000), 0u);
}

// Cleared keeping bans (the forgive channel lost), a ban stays until its
// end and a rejection by a limit goes; cleared outright, both go.
TEST(DenyCache, ClearKeepsBansWhenAsked)
{
    auto cache = make_cache();
    cache->deny("rl:login:a", DenyCache::kBanRoom, kSent, 3600000);
    cache->deny("rl:login:b", kLimit, kSent, 5000);
    cache->clear(1000, true);
    EXPECT_EQ(cache->denied_for("rl:login:a", kLimit, 2000), 3598000u);
    EXPECT_EQ(cache->denied_for("rl:login:b", kLimit, 2000), 0u);
    cache->clear(3000);
    EXPECT_EQ(cache->denied_for("rl:login:a", kLimit, 4000), 0u);
}

TEST(DenyCache, OnlyTheExactKeyIsDenied)
{
    auto cache = make_cache();
    cache->deny("rl:api:a", kLimit, kSent, 5000);

    EXPECT_EQ(cache->denied_for("rl:api:b", kLimit, 1000), 0u);
    EXPECT_EQ(cache->denied_for("rl:api:a ", kLimit, 1000), 0u);
    EXPECT_EQ(cache->denied_for("rl:api:", kLimit, 1000), 0u);
    EXPECT_EQ(cache->denied_for("rl:other:a", kLimit, 1000), 0u);
}

TEST(DenyCache, BinaryKeysCompareByteForByte)
{
    auto cache = make_cache();
    const std::string a("rl:ip:\x7f\x00\x00\x01", 10);
    const std::string b("rl:ip:\x7f\x00\x00\x02", 10);
    cache->deny(a, kLimit, kSent, 5000);

    EXPECT_EQ(cache->denied_for(a, kLimit, 1000), 4000u);
    EXPECT_EQ(cache->denied_for(b, kLimit, 1000), 0u);
}

TEST(DenyCache, ALaterDenyReplacesTheExpiry)
{
    auto cache = make_cache();
    cache->deny("rl:api:a", kLimit, kSent, 5000);
    cache->deny("rl:api:a", kLimit, kSent, 3000);

    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 1000), 2000u);
}

// The cache answers "nothing live" without a lookup once its latest entry
// expired: an entry denied later for a shorter time shortens no other's,
// and after clear() new entries are remembered again.
TEST(DenyCache, EachEntryLivesUntilItsOwnTimeWhateverTheOrder)
{
    auto cache = make_cache();
    cache->deny("rl:api:a", kLimit, kSent, 9000);
    cache->deny("rl:api:b", kLimit, kSent, 3000);

    EXPECT_EQ(cache->denied_for("rl:api:b", kLimit, 2000), 1000u);
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 5000), 4000u);
    EXPECT_EQ(cache->denied_for("rl:api:b", kLimit, 5000), 0u);
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 9000), 0u);

    cache->deny("rl:api:c", kLimit, kSent, 12000);
    EXPECT_EQ(cache->denied_for("rl:api:c", kLimit, 10000), 2000u);

    cache->clear(50);
    EXPECT_EQ(cache->denied_for("rl:api:c", kLimit, 10000), 0u);
    cache->deny("rl:api:a", kLimit, 51, 11000);
    EXPECT_EQ(cache->denied_for("rl:api:a", kLimit, 10000), 1000u);
}

// Many more keys than slots: colliding keys evict each other, and no key is
// ever reported denied unless it was denied itself.
TEST(DenyCache, CollisionsNeverDenyAnotherKey)
{
    auto cache = make_cache();
    const std::size_t keys = DenyCache::kSlots * 4;

    for (std::size_t i = 0; i < keys; i += 2) {
        cache->deny("rl:api:" + std::to_string(i), kLimit, kSent, 10000);
    }

    std::size_t remembered = 0;

    for (std::size_t i = 0; i < keys; i++) {
        std::uint64_t ms = cache->denied_for("rl:api:" + std::to_string(i),
                                             kLimit, 1000);
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

    cache->deny(longest, kLimit, kSent, 5000);
    cache->deny(too_long, kLimit, kSent, 5000);

    EXPECT_EQ(cache->denied_for(longest, kLimit, 1000), 4000u);
    EXPECT_EQ(cache->denied_for(too_long, kLimit, 1000), 0u);
}

// Rejected at limit 10, cost 1 (the count is at 10 at least until the
// reset): a request under 10 or less is rejected too, one under 11 or more
// is not known to be.
TEST(DenyCache, DeniedUpToTheLimitRejectedAt)
{
    auto cache = make_cache();
    cache->deny("rl:plans:a", DenyCache::room(10, 1), kSent, 5000);

    auto denied = [&](std::uint64_t limit) {
        return cache->denied_for("rl:plans:a", DenyCache::room(limit, 1),
                                 1000);
    };
    EXPECT_EQ(denied(10), 4000u);
    EXPECT_EQ(denied(1), 4000u);
    EXPECT_EQ(denied(11), 0u);
    EXPECT_EQ(denied(100), 0u);

    // Rejected again at 100: every limit up to 100 is.
    cache->deny("rl:plans:a", DenyCache::room(100, 1), kSent, 6000);
    EXPECT_EQ(denied(100), 5000u);
    EXPECT_EQ(denied(5), 5000u);
    EXPECT_EQ(denied(101), 0u);
}

// Rejected at limit 100 for a cost of 30 (the count is above 70): a cost of
// 30 or more under 100 is rejected, as is a cost of 1 under 71; a cost of
// 29 under 100, or 30 under 101, may fit.  A cost of 0 needs room for one.
TEST(DenyCache, CostsNarrowTheRoom)
{
    auto cache = make_cache();
    cache->deny("rl:tokens:a", DenyCache::room(100, 30), kSent, 5000);

    auto denied = [&](std::uint64_t limit, std::uint64_t cost) {
        return cache->denied_for("rl:tokens:a", DenyCache::room(limit, cost),
                                 1000);
    };
    EXPECT_EQ(denied(100, 30), 4000u);
    EXPECT_EQ(denied(100, 500), 4000u);
    EXPECT_EQ(denied(71, 1), 4000u);
    EXPECT_EQ(denied(71, 0), 4000u);
    EXPECT_EQ(denied(100, 29), 0u);
    EXPECT_EQ(denied(101, 30), 0u);
    EXPECT_EQ(denied(72, 0), 0u);
    EXPECT_EQ(DenyCache::room(5, 9), -4);
}

}  // namespace
}  // namespace ratelimit
