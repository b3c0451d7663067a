#include "rate/lease_renewals.hpp"

#include <new>

namespace ratelimit {

LeaseRenewal *make_renewal(std::string_view key, std::string_view zone_args,
                           std::uint64_t made_ms, std::uint64_t asked,
                           const Zone &zone, LeaseRenewed renewed) noexcept
{
    try {
        return new LeaseRenewal{std::string(key), std::string(zone_args),
                                made_ms, asked, &zone, 0, renewed};
    } catch (const std::bad_alloc &) {
        LeaseRenewal none{{}, {}, made_ms, asked, &zone, 0, renewed};
        renewed(none, nullptr);
        return nullptr;
    }
}

bool add_renewal(ScriptBatch *call, const LeaseRenewal &renewal,
                 ZoneSide side) noexcept
{
    return call->add_lease(renewal.key, renewal.zone_args, renewal.asked,
                           side);
}

void take_renewal_reply(LeaseRenewal *renewal, std::uint64_t now_ms,
                        const Reply *reply, Told told) noexcept
{
    LeaseGrant grant{0, 0, now_ms, {}};
    ZoneCount count{};
    ScriptReply decoded = decode_lease_reply(reply, &count, &grant.units,
                                             told);
    grant.count = count.total;
    grant.override = count.override;

    // An override only of a zone that reads them.
    bool taken = decoded.kind == ScriptReply::Kind::kVerdict
                 && (!grant.override.set
                     || renewal->zone->side_base.len > 0);

    end_renewal(renewal, taken ? &grant : nullptr);
}

void end_renewal(LeaseRenewal *renewal, const LeaseGrant *grant) noexcept
{
    renewal->renewed(*renewal, grant);
    delete renewal;
}

}  // namespace ratelimit
