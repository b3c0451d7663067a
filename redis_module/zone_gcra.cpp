#include "zone_gcra.hpp"

#include <algorithm>
#include <cmath>

namespace ratelimit {

double round_half_up(double x)
{
    return std::floor(x + 0.5);
}

// need * T > capacity * T, with 1 us of tolerance for T's rounding.
bool gcra_over(double ahead, double cost, const ZoneParams &zone)
{
    return ahead + std::max(cost, 1.0) * zone.gcra
           > zone.span * zone.gcra + 1;
}

// tonumber(tat) or 0, less now, never below 0.
double ZoneGcra::backlog(const FieldValue &tat) const
{
    double at;

    if (!field_number(tat, &at)) {
        at = 0;
    }

    return std::max(at - now_us_, 0.0);
}

CallError ZoneGcra::read_zone(redis::String *key, double *ahead)
{
    FieldValue tat;

    if (redis_.get(key, &tat) != nullptr) {
        if (CallError error = redis_.del(key)) {
            return error;
        }
    }

    *ahead = backlog(tat);
    return nullptr;
}

CallError ZoneGcra::read_fast(redis::String *key, double *ahead)
{
    FieldValue tat;

    if (CallError error = redis_.get(key, &tat)) {
        return error;
    }

    *ahead = backlog(tat);
    return nullptr;
}

CallError ZoneGcra::set_tat(redis::String *key, const ZoneParams &zone,
                            double ahead)
{
    double tat = now_us_ + ahead;
    char value[lua::kMaxText], at[lua::kMaxText];
    lua::format(round_half_up(tat), value);
    lua::format(std::ceil(tat / 1000) + zone.bucket_ms, at);
    return redis_.set_pxat(key, value, at);
}

CallError ZoneGcra::write_zone(redis::String *key, const ZoneParams &zone,
                               double add, double ahead, double *count)
{
    ahead = ahead + add * zone.gcra;
    *count = round_half_up(ahead);
    return add > 0 ? set_tat(key, zone, ahead) : nullptr;
}

CallError ZoneGcra::settle(redis::String *key, const ZoneParams &zone,
                           double delta, double *after, double *applied)
{
    double ahead;

    if (CallError error = read_zone(key, &ahead)) {
        return error;
    }

    double moved = std::max(0.0, ahead + delta * zone.gcra);
    *after = round_half_up(moved);
    *applied = round_half_up((moved - ahead) / zone.gcra);

    if (moved == 0 && ahead > 0) {
        return redis_.del(key);
    }

    return moved != ahead ? set_tat(key, zone, moved) : nullptr;
}

}  // namespace ratelimit
