// What `nginx -t` warns of in a zone it accepts: parameters that work as
// written but rarely as meant, each a text nginx prints after "[warn] ".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "limits/policy.hpp"

namespace ratelimit {

// The most buckets a window is cut into without a warning.  A subject's
// key is a hash with a field per non-empty bucket (and 3 more): Redis
// keeps a hash of up to hash-max-listpack-entries fields (512 by default)
// as one compact listpack, and beyond that as a hash table that costs
// several times the memory per field; the script reads every field of a
// key with HGETALL when a slide finds its buckets sparse, and deletes the
// buckets that left the window, 256 an HDEL.  So its work and a subject's
// memory grow with the buckets in a window.
constexpr std::uint64_t kMaxQuietBuckets = 512;

// The longest window without a warning: a month.  A subject's key lives
// until a window after its last request, so a longer one keeps every
// subject seen in months.
constexpr std::uint64_t kMaxQuietWindowMs = std::uint64_t{31} * 24 * 3600
                                            * 1000;

// The warnings of a rate zone's policy, as the parser read it: `window`
// and `bucket`, the values of `window=` and `bucket=` as written (empty
// if not given).
std::vector<std::string> policy_warnings(const Policy &policy,
                                         std::string_view window,
                                         std::string_view bucket);

// The variables nginx knows when the zone is read: their names, and the
// prefixes it reads any name after (`http_`, `arg_`, `cookie_`, ...).
struct KnownVariables {
    std::vector<std::string_view> names;
    std::vector<std::string_view> prefixes;
};

// A warning if `key` is literal text that names a variable, as if its
// `$` were forgotten (`key=http_x_api_key`): one subject for every
// request.  A literal that names none (`key=all`) is meant, and has none.
std::optional<std::string> literal_key_warning(std::string_view key,
                                               const KnownVariables &known);

// A warning if `value`, the value of the parameter `param` (`cost`,
// `limit` or `rate`), holds a variable the client sets as it likes
// ($http_*, $arg_*, $cookie_*): the client would choose its own cost or
// limit.  None for a variable of the configuration's own (a `map`'s),
// which can allow only the values meant.
std::optional<std::string> client_value_warning(std::string_view param,
                                                std::string_view value);

}  // namespace ratelimit
