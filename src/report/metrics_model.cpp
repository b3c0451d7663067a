#include "report/metrics_model.hpp"

#include <iterator>

namespace ratelimit {

namespace {

using busy_clock::kClosing;
using busy_clock::kStartMask;
constexpr unsigned kMaskShift = 49;

// Bumped whenever ZoneCounters or LinkCounters change shape, so that a
// reload onto a new build never reads an old block as its own.
constexpr std::uint64_t kLayoutVersion = 4;

std::size_t round_up(std::size_t n, std::size_t to)
{
    return (n + to - 1) / to * to;
}

std::uint64_t row_bit(std::size_t row)
{
    return std::uint64_t{1} << (kMaskShift + row % busy_clock::kMaskRows);
}

bool cas(std::uint64_t *word, std::uint64_t *expected, std::uint64_t desired)
{
    return __atomic_compare_exchange_n(word, expected, desired, false,
                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

template <std::size_t kBounds>
void add_histogram(const Histogram<kBounds> &from, Histogram<kBounds> *to)
{
    for (std::size_t i = 0; i <= kBounds; i++) {
        to->buckets[i] += load_counter(&from.buckets[i]);
    }

    to->sum += load_counter(&from.sum);
}

}  // namespace

const std::uint64_t kDurationBoundsUs[kDurationBounds] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000,
    500000, 1000000,
};

const std::string_view kDurationBoundsText[kDurationBounds] = {
    "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01",
    "0.025", "0.05", "0.1", "0.25", "0.5", "1.0",
};

const std::uint64_t kBatchBoundsCount[kBatchBounds] = {1, 2, 4, 8, 16};

const std::string_view kBatchBoundsText[kBatchBounds] = {
    "1.0", "2.0", "4.0", "8.0", "16.0",
};

const std::uint64_t kQueueWaitBoundsUs[kQueueWaitBounds] = {
    1000, 5000, 10000, 50000, 100000, 250000, 500000, 1000000, 2500000,
    5000000, 10000000, 30000000,
};

const std::string_view kQueueWaitBoundsText[kQueueWaitBounds] = {
    "0.001", "0.005", "0.01", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5",
    "5.0", "10.0", "30.0",
};

std::string_view permit_event_name(PermitEvent e)
{
    static constexpr std::string_view kNames[] = {
        "admitted", "admitted_after_wait", "queue_full", "wait_timeout",
        "gone_while_queued",
    };
    static_assert(std::size(kNames)
                  == static_cast<std::size_t>(PermitEvent::kCount));
    return kNames[static_cast<std::size_t>(e)];
}

std::string_view unit_event_name(UnitEvent e)
{
    static constexpr std::string_view kNames[] = {
        "admitted", "rejected", "settle_added", "settle_returned",
    };
    static_assert(std::size(kNames)
                  == static_cast<std::size_t>(UnitEvent::kCount));
    return kNames[static_cast<std::size_t>(e)];
}

std::string_view override_change_name(OverrideChangeKind c)
{
    static constexpr std::string_view kNames[] = {"set", "removed"};
    static_assert(std::size(kNames)
                  == static_cast<std::size_t>(OverrideChangeKind::kCount));
    return kNames[static_cast<std::size_t>(c)];
}

std::string_view settle_outcome_name(SettleOutcome o)
{
    static constexpr std::string_view kNames[] = {
        "applied", "dropped", "unknown", "failed",
    };
    static_assert(std::size(kNames)
                  == static_cast<std::size_t>(SettleOutcome::kCount));
    return kNames[static_cast<std::size_t>(o)];
}

std::string_view decision_name(Decision d)
{
    static const std::string_view names[] = {
        "passed", "rejected", "rejected_dry_run", "error", "error_rejected",
        "invalid",
    };
    return names[static_cast<std::size_t>(d)];
}

std::string_view link_error_name(LinkError e)
{
    static const std::string_view names[] = {
        "timeout", "connect", "closed", "error_reply", "noscript",
        "top_dropped",
    };
    return names[static_cast<std::size_t>(e)];
}

std::string_view link_state_name(LinkState s)
{
    static const std::string_view names[] = {"down", "connecting", "up"};
    return names[static_cast<std::size_t>(s)];
}

std::string_view local_decision_name(LocalDecision d)
{
    static constexpr std::string_view kNames[] = {"passed", "rejected"};
    static_assert(std::size(kNames)
                  == static_cast<std::size_t>(LocalDecision::kCount));
    return kNames[static_cast<std::size_t>(d)];
}

std::size_t bucket_index(const std::uint64_t *bounds, std::size_t n,
                         std::uint64_t value)
{
    std::size_t i = 0;

    while (i < n && value > bounds[i]) {
        i++;
    }

    return i;
}

MetricsLayout::MetricsLayout(std::size_t zones, std::size_t rows)
    : zones_(zones), rows_(rows),
      row_size_(round_up(sizeof(LinkCounters) + zones * sizeof(ZoneCounters),
                         kCacheLine))
{
}

std::size_t MetricsLayout::row_offset(std::size_t row) const
{
    return round_up(zones_ * sizeof(std::uint64_t), kCacheLine)
           + row * row_size_;
}

std::size_t MetricsLayout::size() const
{
    return row_offset(rows_);
}

std::uint64_t *MetricsLayout::busy_word(void *block, std::size_t zone) const
{
    return static_cast<std::uint64_t *>(block) + zone;
}

LinkCounters *MetricsLayout::link(void *block, std::size_t row) const
{
    return reinterpret_cast<LinkCounters *>(static_cast<char *>(block)
                                            + row_offset(row));
}

ZoneCounters *MetricsLayout::zone(void *block, std::size_t row,
                                  std::size_t zone) const
{
    auto *zones = reinterpret_cast<ZoneCounters *>(link(block, row) + 1);
    return zones + zone;
}

std::uint64_t layout_signature(const std::string_view *names,
                               std::size_t zones, std::size_t rows)
{
    std::uint64_t h = 0xcbf29ce484222325;
    auto mix = [&h](std::string_view bytes) {
        for (unsigned char c : bytes) {
            h = (h ^ c) * 0x100000001b3;
        }
        // A separator no name holds, so "ab","c" differs from "a","bc".
        h = (h ^ 0xff) * 0x100000001b3;
    };
    auto mix_number = [&mix](std::uint64_t n) {
        mix({reinterpret_cast<const char *>(&n), sizeof(n)});
    };

    mix_number(kLayoutVersion);
    mix_number(rows);

    for (std::size_t i = 0; i < zones; i++) {
        mix(names[i]);
    }

    return h;
}

void busy_clock::enter(std::uint64_t *word, std::size_t row,
                       std::uint64_t now_us)
{
    std::uint64_t bit = row_bit(row);
    std::uint64_t old = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    std::uint64_t desired;

    do {
        if (old & bit) {
            return;  // another process of this row (a reload's old worker)
        }

        desired = (old >> kMaskShift) == 0
                  ? bit | (old & kClosing) | (now_us & kStartMask)
                  : old | bit;
    } while (!cas(word, &old, desired));
}

void busy_clock::leave(std::uint64_t *word, std::size_t row,
                       std::uint64_t now_us, std::uint64_t *busy_us)
{
    std::uint64_t bit = row_bit(row);
    std::uint64_t old = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    std::uint64_t desired;

    do {
        if (!(old & bit)) {
            return;
        }

        desired = old & ~bit;

        if ((desired >> kMaskShift) == 0) {
            desired |= kClosing;
        }
    } while (!cas(word, &old, desired));

    if (!(desired & kClosing)) {
        return;  // other rows are still busy
    }

    __atomic_fetch_add(busy_us, (now_us - old) & kStartMask,
                       __ATOMIC_RELEASE);

    // The flag was already set if the closer of the interval before this
    // one has not cleared it yet: that one clears it.
    if (!(old & kClosing)) {
        __atomic_fetch_and(word, ~kClosing, __ATOMIC_RELEASE);
    }
}

void add_zone(const ZoneCounters &row, ZoneCounters *sum)
{
    for (std::size_t i = 0; i < static_cast<std::size_t>(Decision::kCount);
         i++)
    {
        sum->decisions[i] += load_counter(&row.decisions[i]);
    }

    sum->deny_cache_hits += load_counter(&row.deny_cache_hits);
    add_histogram(row.check_us, &sum->check_us);
    sum->successes += load_counter(&row.successes);
    sum->response_us += load_counter(&row.response_us);
    sum->busy_us += load_counter(&row.busy_us);

    std::uint64_t applied_us = load_counter(&row.applied_us);

    if (applied_us > sum->applied_us) {
        sum->applied_us = applied_us;
        sum->applied_limit = load_counter(&row.applied_limit);
    }

    for (std::size_t i = 0; i < static_cast<std::size_t>(PermitEvent::kCount);
         i++)
    {
        sum->permit_events[i] += load_counter(&row.permit_events[i]);
    }

    sum->permits_taken += load_counter(&row.permits_taken);
    sum->permits_freed += load_counter(&row.permits_freed);
    sum->queue_entered += load_counter(&row.queue_entered);
    sum->queue_left += load_counter(&row.queue_left);
    add_histogram(row.queue_wait_us, &sum->queue_wait_us);

    for (std::size_t i = 0; i < static_cast<std::size_t>(UnitEvent::kCount);
         i++)
    {
        sum->units[i] += load_counter(&row.units[i]);
    }

    for (std::size_t i = 0;
         i < static_cast<std::size_t>(SettleOutcome::kCount); i++)
    {
        sum->settles[i] += load_counter(&row.settles[i]);
    }

    for (std::size_t i = 0;
         i < static_cast<std::size_t>(OverrideChangeKind::kCount); i++)
    {
        sum->override_changes[i] += load_counter(&row.override_changes[i]);
    }

    sum->bans += load_counter(&row.bans);
    sum->banned_requests += load_counter(&row.banned_requests);
    sum->delayed += load_counter(&row.delayed);
    add_histogram(row.delay_us, &sum->delay_us);

    for (std::size_t i = 0;
         i < static_cast<std::size_t>(LocalDecision::kCount); i++)
    {
        sum->local[i] += load_counter(&row.local[i]);
    }
}

void add_link(const LinkCounters &row, std::uint64_t now_us,
              LinkCounters *sum)
{
    std::uint64_t since = load_counter(&row.local_since_us);

    sum->local_us += load_counter(&row.local_us)
                     + (since != 0 && now_us > since ? now_us - since : 0);

    sum->calls += load_counter(&row.calls);
    add_histogram(row.requests_per_call, &sum->requests_per_call);
    add_histogram(row.round_trip_us, &sum->round_trip_us);

    for (std::size_t i = 0; i < static_cast<std::size_t>(LinkError::kCount);
         i++)
    {
        sum->errors[i] += load_counter(&row.errors[i]);
    }

    sum->reconnects += load_counter(&row.reconnects);
    sum->waiting += load_counter(&row.waiting);
}

}  // namespace ratelimit
