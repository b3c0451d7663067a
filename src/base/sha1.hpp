// SHA-1, OpenSSL's (nginx links it already), for the script digest EVALSHA
// names and for shortening long subjects, and HMAC-SHA-1 for the hash tags
// of a cluster's keys.  Not used for anything that needs collision
// resistance against a chosen-prefix attacker.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace ratelimit {

using Sha1Digest = std::array<std::uint8_t, 20>;

Sha1Digest sha1(std::string_view data);

// 40 lowercase hex digits, the form Redis's SCRIPT LOAD answers with.
constexpr std::size_t kSha1HexLength = 40;
void sha1_hex(std::string_view data, char out[kSha1HexLength]);

// Writes the first `digits` (at most kSha1HexLength) lowercase hex digits
// of `digest` to `out`; returns the end.
char *digest_hex(const Sha1Digest &digest, std::size_t digits, char *out);

// HMAC-SHA-1 of `data` under `key` (RFC 2104); `key` may be empty.
Sha1Digest hmac_sha1(std::string_view key, std::string_view data);

}  // namespace ratelimit
