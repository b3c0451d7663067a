#include "params/override_params.hpp"

#include "limits/algorithms.hpp"
#include "limits/window_rules.hpp"

namespace ratelimit {

namespace {

// A GCRA zone's rate=: N per unit; "0r/s" and the like too, refusing all.
std::optional<Rate> read_rate(std::string_view text)
{
    if (!blocks_all(text, true)) {
        return parse_rate(text);
    }

    const char one[] = {'1', 'r', '/', text.back()};
    std::optional<Rate> unit = parse_rate({one, sizeof(one)});
    return Rate{0, unit->window_ms};
}

}  // namespace

std::optional<OverrideChange> parse_override(const Policy &policy,
                                             const OverrideParams &params,
                                             const char **error)
{
    bool turns = row_of(policy).takes_turns;
    OverrideChange change{false, 0, policy.window_ms, 0};

    if (params.limit == std::string_view("default")) {
        change.remove = true;
    } else if (turns && params.limit) {
        *error = "a GCRA zone takes a rate: give rate=Nr/s or Nr/m";
        return std::nullopt;
    } else if (!turns && params.rate) {
        *error = "this zone counts requests per window: give limit=N";
        return std::nullopt;
    } else if (!params.limit && !params.rate) {
        *error = "missing limit: use limit=N, or limit=default to remove";
        return std::nullopt;
    } else if (turns) {
        std::optional<Rate> rate = read_rate(*params.rate);

        if (!rate) {
            *error = "rate must be Nr/s, Nr/m, Nr/h or Nr/d";
            return std::nullopt;
        }

        if (rate->limit > 0
            && (1 + policy.burst) * (rate->window_ms / rate->limit)
                   > window_rules::kMaxWindowMs)
        {
            *error = "rate too slow for the zone's burst: give a faster one";
            return std::nullopt;
        }

        change.limit = rate->limit;
        change.window_ms = rate->window_ms;
    } else {
        std::optional<std::uint64_t> limit = parse_units(*params.limit);

        if (!limit || *limit > window_rules::kMaxLimit) {
            *error = "limit must be a whole number from 0 to 2^53, or "
                     "default";
            return std::nullopt;
        }

        change.limit = *limit;
    }

    if (params.ttl) {
        std::optional<std::uint64_t> s = parse_count(*params.ttl);

        if (!s || *s > kMaxOverrideTtlS) {
            *error = "ttl must be whole seconds from 1";
            return std::nullopt;
        }

        change.ttl_ms = *s * 1000;
    }

    return change;
}

}  // namespace ratelimit
