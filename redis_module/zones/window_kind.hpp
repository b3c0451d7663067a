// The window zone kind, sliding or fixed: a zone's hash read and written
// back by ZoneWindow (zone_window.hpp), settled by Settler (settle.hpp),
// and the script's run_window(), the fast path of a counted request of one
// window zone.
#pragma once

#include "store/store.hpp"
#include "zones/batch.hpp"
#include "zones/packed_zone.hpp"
#include "zones/settle.hpp"
#include "zones/zone_kind.hpp"
#include "zones/zone_window.hpp"

namespace ratelimit {

class WindowKind final : public ZoneKind {
public:
    explicit WindowKind(Store *store)
        : store_(*store), packed_(store), window_(store, &packed_),
          settler_(&window_, &packed_, store) {}

    CallError read_zone(KeyNumber key, const ZoneParams &zone,
                        ZoneRead *z) override
    {
        return window_.read_zone(key, zone, z);
    }

    // The count and `cost` (at least 1) over the limit.
    bool over(const ZoneRead &z, double cost,
              const ZoneParams &zone) const override;

    CallError write_zone(KeyNumber key, const ZoneParams &zone, double add,
                         ZoneRead *z, double *count, double *oldest) override
    {
        return window_.write_zone(key, zone, add, z, count, oldest);
    }

    CallError settle(KeyNumber key, const ZoneParams &zone, double delta,
                     double at, double *count, double *oldest,
                     double *applied) override
    {
        return settler_.settle(key, zone, delta, at, count, oldest, applied);
    }

    // A fixed window's is its count; a sliding one's is summed.
    CallError count_newest(KeyNumber key, const ZoneParams &zone,
                           double wanted, double count,
                           double *out) override;

    // A packed string whose newest bucket (or fixed window) is the
    // current one with none to cut, or no key where new keys are strings:
    // counted in place, or made.  kRaised where the script's run_window()
    // raised, having written nothing (or in the one write that failed),
    // or hands the request to careful(), a hash's among them.
    void run(KeyNumber key, const ZoneParams &zone,
             FastDecision *out) override;

private:
    Store &store_;
    PackedZone packed_;
    ZoneWindow window_;
    Settler settler_;
    ZoneRead fast_;  // what run() read
};

}  // namespace ratelimit
