#include "scripts/verdict.hpp"

#include "limits/algorithms.hpp"

namespace ratelimit {

namespace {

ZoneStatus limit_status(const Policy &policy, const ZoneCount &count,
                        std::uint64_t now_ms)
{
    // A subject whose override gives it limit 0 fits nothing until the
    // override lapses, or for a window when it never does.
    if (policy.limit == 0) {
        return {0, 0, count.override.left_ms > 0 ? count.override.left_ms
                                                 : policy.window_ms};
    }

    return row_of(policy).status(policy, count.total, count.oldest,
                                 count.over, now_ms);
}

}  // namespace

ZoneStatus zone_status(const Policy &policy, const ZoneCount &count,
                       std::uint64_t now_ms)
{
    ZoneStatus status = limit_status(policy, count, now_ms);

    // A banned subject fits nothing until its ban ends, whatever its count.
    if (count.ban_left_ms > 0) {
        status.remaining = 0;
        status.reset_ms = count.ban_left_ms;
    }

    return status;
}

std::optional<Verdict> decide_verdict(const Policy *const *policies,
                                      const bool *enforced,
                                      const ZoneCount *counts,
                                      std::size_t zones, std::uint64_t now_ms,
                                      bool rejected)
{
    Verdict verdict{Outcome::kPassed, 0, {}};
    bool chosen = false;

    for (std::size_t i = 0; i < zones; i++) {
        ZoneStatus status = zone_status(*policies[i], counts[i], now_ms);

        if (counts[i].over && !rejected) {
            verdict.outcome = Outcome::kRejectedDryRun;
        }

        bool take = rejected ? counts[i].over && enforced[i] && !chosen
                             : !chosen
                               || status.remaining
                                  < verdict.status.remaining;

        if (take) {
            verdict.zone = i;
            verdict.status = status;
            chosen = true;
        }
    }

    if (rejected && !chosen) {
        return std::nullopt;
    }

    if (rejected) {
        verdict.outcome = Outcome::kRejected;
    }

    return verdict;
}

}  // namespace ratelimit
