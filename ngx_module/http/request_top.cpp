#include "http/request_top.hpp"

#include "top/top_memory.hpp"

namespace ratelimit {

void record_request_top(const RequestState *state) noexcept
{
    ngx_shm_zone_t *shm = main_conf(state->r)->top_zone;

    if (shm == nullptr || state->peek
        || (state->result != Result::kPassed
            && state->result != Result::kRejected
            && state->result != Result::kRejectedDryRun))
    {
        return;
    }

    auto now_s = static_cast<std::uint64_t>(ngx_time());

    for (ngx_uint_t i = 0; i < state->zones; i++) {
        const Zone &zone = *state->refs[i]->zone;

        if (zone.top > 0) {
            bool rejected = state->result == Result::kRejected
                            && i == state->verdict.zone;
            top::record(shm, zone, view(state->subjects[i]), rejected, now_s);
        }
    }
}

}  // namespace ratelimit
