#include "zones/zone_gcra.hpp"

#include <algorithm>
#include <cmath>

namespace ratelimit {

namespace {

// Lua's math.floor(x + 0.5), the script's rounding to nearest.
double round_half_up(double x)
{
    return std::floor(x + 0.5);
}

// Whether `cost` units do not fit in a backlog of `ahead` us: within 1 us
// of the capacity still fits; nothing fits a zone of limit 0, a side
// zone's own or an override's (side_value.hpp), nor one whose subject's
// ban is in force.
bool gcra_over(double ahead, double cost, const ZoneParams &zone)
{
    return zone.barred || zone.limit == 0
           || ahead + std::max(cost, 1.0) * zone.gcra
                  > zone.span * zone.gcra + 1;
}

}  // namespace

// tonumber(tat) or 0, less now, never below 0.
double ZoneGcra::backlog(const FieldValue &tat) const
{
    double at;

    if (!field_number(tat, &at)) {
        at = 0;
    }

    return std::max(at - now_us_, 0.0);
}

CallError ZoneGcra::read_tat(KeyNumber key, double *ahead)
{
    FieldValue tat;

    if (store_.get(key, &tat) != nullptr) {
        if (CallError error = store_.del(key)) {
            return error;
        }
    }

    *ahead = backlog(tat);
    return nullptr;
}

CallError ZoneGcra::read_zone(KeyNumber key, const ZoneParams &,
                              ZoneRead *z)
{
    return read_tat(key, &z->count);
}

bool ZoneGcra::over(const ZoneRead &z, double cost,
                    const ZoneParams &zone) const
{
    return gcra_over(z.count, cost, zone);
}

CallError ZoneGcra::read_fast(KeyNumber key, double *ahead)
{
    FieldValue tat;

    if (CallError error = store_.get(key, &tat)) {
        return error;
    }

    *ahead = backlog(tat);
    return nullptr;
}

CallError ZoneGcra::set_tat(KeyNumber key, const ZoneParams &zone,
                            double ahead)
{
    double tat = now_us_ + ahead;
    char value[lua::kMaxText], at[lua::kMaxText];
    lua::format(round_half_up(tat), value);
    lua::format(std::ceil(tat / 1000) + zone.bucket_ms, at);
    return store_.set_pxat(key, value, at);
}

CallError ZoneGcra::write_zone(KeyNumber key, const ZoneParams &zone,
                               double add, ZoneRead *z, double *count,
                               double *oldest)
{
    double ahead = z->count + add * zone.gcra;
    *count = round_half_up(ahead);
    *oldest = 0;
    return add > 0 ? set_tat(key, zone, ahead) : nullptr;
}

CallError ZoneGcra::settle(KeyNumber key, const ZoneParams &zone,
                           double delta, double, double *count,
                           double *oldest, double *applied)
{
    double ahead;

    if (CallError error = read_tat(key, &ahead)) {
        return error;
    }

    double moved = std::max(0.0, ahead + delta * zone.gcra);
    *count = round_half_up(moved);
    *oldest = 0;
    *applied = round_half_up((moved - ahead) / zone.gcra);

    if (moved == 0 && ahead > 0) {
        return store_.del(key);
    }

    return moved != ahead ? set_tat(key, zone, moved) : nullptr;
}

CallError ZoneGcra::count_newest(KeyNumber, const ZoneParams &, double,
                                 double, double *out)
{
    *out = 0;
    return nullptr;
}

void ZoneGcra::run(KeyNumber key, const ZoneParams &zone, FastDecision *out)
{
    double ahead;

    if (read_fast(key, &ahead) != nullptr) {
        out->outcome = FastDecision::kRaised;
        return;
    }

    bool over = gcra_over(ahead, 1, zone);

    // A zone that bans leaves a refusal to the careful path, which bans.
    if ((over && zone.ban_ms > 0)
        || (!over && set_tat(key, zone, ahead + zone.gcra) != nullptr))
    {
        out->outcome = FastDecision::kRaised;
        return;
    }

    out->outcome = FastDecision::kDecided;
    out->reply[0] = over && zone.enforce ? 1 : 0;
    out->reply[1] = round_half_up(over ? ahead : ahead + zone.gcra);
    out->reply[2] = 0;
    out->reply[3] = over ? 1 : 0;
}

}  // namespace ratelimit
