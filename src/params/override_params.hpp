// The parameters of a PUT on the status API (`ratelimit_query ...
// override=on`) that sets or removes a subject's override of its zone's
// limit (limits/override.hpp): limit=N or limit=default, of a GCRA zone
// rate=Nr/s (or /m, /h, /d), and ttl=SECONDS.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "limits/override.hpp"
#include "limits/policy.hpp"

namespace ratelimit {

// A PUT's parameters as given: nullopt for one not given.
struct OverrideParams {
    std::optional<std::string_view> limit;
    std::optional<std::string_view> rate;
    std::optional<std::string_view> ttl;
};

// The most seconds ttl= takes: 2^31 - 1, about 68 years.
constexpr std::uint64_t kMaxOverrideTtlS = 2147483647;

// The change `params` ask of a zone of `policy` (its algorithm, window and
// the largest burst it is applied with) named `zone`; nullopt with the
// reason, one line for a 400 answer, in *error.  A window zone takes
// limit=N, 0 to 2^53, a count per its window; a GCRA zone a rate, whose
// 1 + burst turns must fit in the longest window.  limit=default removes
// either's.
std::optional<OverrideChange> parse_override(const Policy &policy,
                                             const OverrideParams &params,
                                             const char **error);

}  // namespace ratelimit
