// SHA-1, OpenSSL's (nginx links it already), for the script digest EVALSHA
// names and for shortening long subjects.  Not used for anything that needs collision resistance
// against a chosen-prefix attacker.
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

}  // namespace ratelimit
