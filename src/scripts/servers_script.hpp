// The live servers of a fleet, as `ratelimit_fail local` learns them while
// Redis is up: a sorted set, one member per nginx server (its id), scored
// by the member's expiry in Redis time (ms).  One worker per server
// announces it every second with an expiry kServerTtlMs ahead, removing
// the members whose expiry has passed; every worker reads the count of
// members not expired.  Redis's TIME is the one clock, so servers' clocks
// may differ.
//
// Call: EVAL script 1 KEY ID TTL_MS; ID empty: count only.
// Reply: the live servers, an integer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ratelimit {

constexpr std::uint64_t kServerTtlMs = 3000;

std::string_view servers_script();

// The key of the set: "PREFIX:servers", or "{PREFIX}:servers" in a cluster
// (a hash tag of the fleet's own, as zone keys carry their subject's).
// Zone keys are "PREFIX:ZONE:..." or "PREFIX:ZONE#...": a key of two parts
// only is none of them.
std::string servers_key(std::string_view prefix, bool cluster);

// The RESP command of a call: announces `id` (unless empty) and counts.
// Empty if it cannot be formatted.  Throws std::bad_alloc.
std::string servers_call(std::string_view key, std::string_view id);

}  // namespace ratelimit
