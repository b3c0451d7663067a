// From the script's counts to what the client is told: the outcome, and the
// zone whose numbers go into the headers and variables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "limits/policy.hpp"
#include "scripts/window_script.hpp"

namespace ratelimit {

enum class Outcome {
    kPassed,
    kRejected,
    kRejectedDryRun,  // over a limit only in dry-run zones: passed anyway
};

// A zone's numbers as the script's counts and Redis's clock give them: its
// row's status (algorithms.hpp); of a subject banned in the zone, none
// remaining until the ban ends.
ZoneStatus zone_status(const Policy &policy, const ZoneCount &count,
                       std::uint64_t now_ms);

struct Verdict {
    Outcome outcome;
    // The zone that rejected the request (the first enforced zone it did not
    // fit in), else the one with the fewest remaining, the first on a tie.
    std::size_t zone;
    ZoneStatus status;  // of `zone`
};

// `policies`, `enforced` (false for a dry-run zone) and `counts` hold `zones`
// entries, in the order the zones were sent to the script; `rejected` is the
// script's own decision.  nullopt if the reply contradicts itself: the script
// rejects only for an enforced zone the request did not fit.
std::optional<Verdict> decide_verdict(const Policy *const *policies,
                                      const bool *enforced,
                                      const ZoneCount *counts,
                                      std::size_t zones, std::uint64_t now_ms,
                                      bool rejected);

}  // namespace ratelimit
