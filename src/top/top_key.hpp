// A subject as the top subjects keep it: its bytes if at most kTopKeyBytes,
// else its first kTopKeyBytes - 20 bytes, "...#" and 16 hex digits of its
// 64-bit FNV-1a hash, so that two long subjects with the same first bytes
// stay apart (and one is shown so).  Every server makes the same stored
// form of a subject: the fleet's counts of it meet in Redis.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ratelimit {

constexpr std::size_t kTopKeyBytes = 64;

// FNV-1a, 64 bits: the long subject's mark and the counters' quick compare.
std::uint64_t top_key_hash(std::string_view bytes);

// Writes the stored form of `subject` into out (kTopKeyBytes bytes);
// returns its length.
std::size_t write_top_key(std::string_view subject, char *out);

}  // namespace ratelimit
