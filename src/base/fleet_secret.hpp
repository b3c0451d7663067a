// The keys the servers of a fleet derive from the secret they share
// (`ratelimit_redis ... fleet_secret_file=`): one for the hash tags of a
// cluster's keys, one that signs the wake-ups of concurrency zones.  Each
// is HMAC-SHA-1 of its own label under the secret, so that the wake-up
// key, which goes to Redis with every concurrency call, tells nothing of
// the secret or of the tag key.
#pragma once

#include <string_view>

#include "base/sha1.hpp"

namespace ratelimit {

struct FleetKeys {
    Sha1Digest tag_key;                // raw bytes
    char wake_key[kSha1HexLength];     // hex, as the script takes it
};

FleetKeys derive_fleet_keys(std::string_view secret);

}  // namespace ratelimit
