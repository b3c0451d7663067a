#include "base/fleet_secret.hpp"

namespace ratelimit {

FleetKeys derive_fleet_keys(std::string_view secret)
{
    FleetKeys keys;

    keys.tag_key = hmac_sha1(secret, "ratelimit hash tag");
    digest_hex(hmac_sha1(secret, "ratelimit wake-up"), kSha1HexLength,
               keys.wake_key);
    return keys;
}

}  // namespace ratelimit
