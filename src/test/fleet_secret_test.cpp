#include "base/fleet_secret.hpp"

#include <string>

#include <gtest/gtest.h>

#include "scripts/concurrency_script.hpp"

namespace ratelimit {
namespace {

// Vectors from Python's hmac and hashlib.
TEST(FleetSecret, KeysAreHmacsOfTheirLabels)
{
    FleetKeys keys = derive_fleet_keys("one secret for the fleet");
    char tag[kSha1HexLength];
    digest_hex(keys.tag_key, kSha1HexLength, tag);

    EXPECT_EQ(std::string(tag, kSha1HexLength),
              "00e6ce24b0b3b166773a39fb51b8359a63303cc2");
    EXPECT_EQ(std::string(keys.wake_key, kSha1HexLength),
              "c86835425accc5695961e45cad1c2115b322969c");
}

// The script makes the same with redis.sha1hex(KEY .. ':' .. MESSAGE ..
// ':' .. KEY): t/40 checks the two agree on a real Redis.
TEST(FleetSecret, WakeupSignature)
{
    char sig[kSha1HexLength];
    wakeup_signature("0123456789abcdef0123456789abcdef01234567",
                     "0a1b2c3d4e5f6a7b.42 1764000000000000", sig);
    EXPECT_EQ(std::string(sig, kSha1HexLength),
              "47778deef04a539a9723e7b7680823b24c174910");
}

}  // namespace
}  // namespace ratelimit
