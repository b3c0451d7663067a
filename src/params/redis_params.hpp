// `ratelimit_redis [cluster] ADDRESS ... [cross_slot] [NAME=VALUE ...]`:
// where Redis is and how to talk to it, read from the directive's tokens
// as plain values.  The addresses are read (and resolved) by nginx, the
// password file read by nginx.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "params/param_values.hpp"

namespace ratelimit {

// Unless configured: a request waits 50 ms for its verdict; each step of a
// connect (TCP, TLS, asking a sentinel, checking ROLE) takes at most 1 s.
constexpr std::uint64_t kDefaultRedisTimeoutMs = 50;
constexpr std::uint64_t kDefaultRedisConnectTimeoutMs = 1000;

// An ADDRESS token: a Redis server, a sentinel or a seed node.
struct RedisAddressParam {
    std::string_view text;
    std::size_t token;       // its index in the tokens
};

// Strings are empty when not given (a given one is never empty).
struct RedisParams {
    std::vector<RedisAddressParam> addresses;
    bool cluster = false;               // addresses are seed nodes
    bool cross_slot = false;            // calls batched per master
    std::string_view sentinel_master;   // addresses are sentinels
    std::string_view user;
    std::string_view password;
    std::string_view password_file;     // the password is its first line
    std::string_view sentinel_user;
    std::string_view sentinel_password;
    std::string_view fleet_secret_file; // its first line: the secret the
                                        // servers of the fleet share
    std::int64_t db = 0;                // SELECT unless 0
    std::uint64_t timeout_ms = kDefaultRedisTimeoutMs;
    std::uint64_t connect_timeout_ms = kDefaultRedisConnectTimeoutMs;
    bool packed = true;                 // new window keys packed strings,
                                        // else hashes (layout=hash)
};

// The longest password: Redis 7 refuses a longer argument from a client
// that has not authenticated ("Protocol error: unauthenticated bulk
// length") and drops the connection, so AUTH could never send it.
constexpr std::size_t kMaxPasswordSize = 16384;

// The password of a password_file: its first line, up to the first "\r" or
// "\n", of `head`, the file's first kMaxPasswordSize + 1 bytes (all of a
// shorter file).  `too_long` if that line is longer than kMaxPasswordSize,
// then the password is empty, as it is for an empty line.
struct PasswordLine {
    std::string_view password;
    bool too_long;
};

PasswordLine password_file_line(std::string_view head);

// tokens: the directive's arguments.  An error about a token comes after
// the addresses before it were read: the nginx side reads those first.
ParamResult<RedisParams> parse_redis_params(const ParamTokens &tokens);

}  // namespace ratelimit
