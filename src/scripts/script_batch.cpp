#include "scripts/script_batch.hpp"

#include <cstring>
#include <new>

#include "protocol/batch_protocol.hpp"
#include "scripts/decide_command.hpp"
#include "limits/algorithms.hpp"
#include "limits/rate_headers.hpp"
#include "scripts/window_script.hpp"

namespace ratelimit {

namespace {

// "$LEN\r\n" (a bulk string's header) or "*LEN\r\n" (an array's) into out,
// which holds kMaxDigits + 3 bytes; returns its size.
std::size_t put_head(char *out, char type, std::size_t len)
{
    out[0] = type;
    std::size_t n = 1 + write_decimal(len, out + 1);
    out[n++] = '\r';
    out[n++] = '\n';
    return n;
}

// "$LEN\r\nBYTES\r\n" into out, which holds kMaxDigits + 5 + bytes.size().
char *put_bulk(char *out, std::string_view bytes)
{
    out += put_head(out, '$', bytes.size());
    std::memcpy(out, bytes.data(), bytes.size());
    out += bytes.size();
    *out++ = '\r';
    *out++ = '\n';
    return out;
}

char *put_decimal_bulk(char *out, std::uint64_t value)
{
    char digits[kMaxDigits];
    return put_bulk(out, {digits, write_decimal(value, digits)});
}

// "$LEN\r\n", the head of a bulk string of `len` bytes.
void append_head(std::string &out, std::size_t len)
{
    char head[kMaxDigits + 3];
    out.append(head, put_head(head, '$', len));
}

void append_bulk(std::string &out, std::string_view bytes)
{
    append_head(out, bytes.size());
    out.append(bytes).append("\r\n", 2);
}

void append_decimal_bulk(std::string &out, std::uint64_t value)
{
    char digits[kMaxDigits];
    append_bulk(out, {digits, write_decimal(value, digits)});
}

// The start of an entry: its mode and, for an interval peek or a request
// of costs other than 1, a number per zone, each followed by "," or, after
// the last, ":" (see window_script.hpp).  `out` holds kMaxEntryHead bytes.
constexpr std::size_t kMaxEntryHead = 1 + kMaxZonesPerRequest
                                          * (kMaxDigits + 1);

bool all_ones(std::size_t zones, const std::uint64_t *costs)
{
    for (std::size_t i = 0; costs != nullptr && i < zones; i++) {
        if (costs[i] != 1) {
            return false;
        }
    }

    return true;
}

std::size_t write_entry_head(bool peek, std::size_t zones,
                             const std::uint64_t *interval_buckets,
                             const std::uint64_t *costs, char *out)
{
    const std::uint64_t *numbers = interval_buckets;

    if (numbers == nullptr && (peek || all_ones(zones, costs))) {
        out[0] = peek ? kEntryPeek : kEntryCount;
        return 1;
    }

    std::size_t n = 0;
    out[n++] = numbers != nullptr ? kEntryInterval : kEntryCosts;
    numbers = numbers != nullptr ? numbers : costs;

    for (std::size_t i = 0; i < zones; i++) {
        n += write_decimal(numbers[i], out + n);
        out[n++] = i + 1 < zones ? kNumberNext : kNumbersEnd;
    }

    return n;
}

// The ban a zone sends: an enforced side zone's; none of a dry-run one.
std::uint64_t ban_sent(bool enforce, ZoneSide side)
{
    return enforce && !side.base.empty() ? side.ban_ms : 0;
}

}  // namespace

std::size_t write_zone_args(const Policy &policy, char *out)
{
    const AlgorithmRow &row = row_of(policy);
    char *p = put_decimal_bulk(out, policy.limit);
    p = put_decimal_bulk(p, row.bucket_arg(policy));
    p = put_decimal_bulk(p, row.span(policy));
    p = put_bulk(p, {&row.wire_kind, 1});
    return static_cast<std::size_t>(p - out);
}

bool ScriptBatch::described_as(const Descriptor &d, std::string_view args,
                               bool enforce, ZoneSide side) const noexcept
{
    return d.enforce == enforce && d.size == args.size()
           && std::memcmp(zones_.data() + d.at, args.data(), d.size) == 0
           && std::string_view(zones_.data() + d.base_at, d.base_size)
                  == side.base
           && d.ban_ms == ban_sent(enforce, side);
}

// Appends a zone new to the batch: its arguments and its mode, of a side
// zone the mode's letter and base (and its marker key: the base, then its
// tail), of one that bans the letter kZoneEnforcedBan, the ban's length
// and kNumbersEnd before the base.  Throws bad_alloc.
void ScriptBatch::describe(std::string_view args, bool enforce,
                           ZoneSide side)
{
    bool sided = !side.base.empty();
    std::uint64_t ban_ms = ban_sent(enforce, side);
    char ban[kMaxDigits + 1];
    std::size_t ban_size = 0;

    if (ban_ms > 0) {
        ban_size = write_decimal(ban_ms, ban);
        ban[ban_size++] = kNumbersEnd;
    }

    char mode = ban_ms > 0 ? kZoneEnforcedBan
                : sided ? (enforce ? kZoneEnforcedSide : kZoneDryRunSide)
                        : (enforce ? kZoneEnforced : kZoneDryRun);
    std::size_t at = zones_.size();

    zones_.append(args);
    append_head(zones_, 1 + ban_size + side.base.size());
    zones_.append(1, mode).append(ban, ban_size);
    described_.push_back({at, args.size(), enforce, zones_.size(),
                          side.base.size(), ban_ms});
    zones_.append(side.base).append("\r\n", 2);

    if (sided) {
        append_head(markers_, side.base.size() + side.marker_tail.size());
        markers_.append(side.base).append(side.marker_tail).append("\r\n");
        side_zones_++;
    }
}

bool ScriptBatch::add(bool peek, std::size_t zones,
                      const std::string_view *keys,
                      const std::string_view *zone_args,
                      const bool *enforce,
                      const std::uint64_t *interval_buckets,
                      const std::uint64_t *costs,
                      const ZoneSide *sides) noexcept
{
    if (zones == 0 || zones > kMaxZonesPerRequest
        || (interval_buckets != nullptr && !peek))
    {
        return false;
    }

    for (std::size_t i = 0; costs != nullptr && i < zones; i++) {
        if (costs[i] > kMaxCost) {
            return false;
        }
    }

    char head[kMaxEntryHead];
    std::size_t size = write_entry_head(peek, zones, interval_buckets, costs,
                                        head);

    return add_entry({head, size}, zones, keys, zone_args, enforce, sides,
                     interval_buckets != nullptr
                         ? kIntervalRepliesPerZone * zones : 0);
}

bool ScriptBatch::add_settle(std::string_view key,
                             std::string_view zone_args, std::int64_t units,
                             std::uint64_t bucket, ZoneSide side) noexcept
{
    std::uint64_t magnitude = units < 0 ? 0 - static_cast<std::uint64_t>(units)
                                        : static_cast<std::uint64_t>(units);

    if (magnitude > kMaxCost) {
        return false;
    }

    char head[2 + 2 * kMaxDigits + 2];
    std::size_t n = 0;
    head[n++] = kEntrySettle;

    if (units < 0) {
        head[n++] = '-';
    }

    n += write_decimal(magnitude, head + n);
    head[n++] = kNumberNext;
    n += write_decimal(bucket, head + n);
    head[n++] = kNumbersEnd;

    bool enforce = true;
    return add_entry({head, n}, 1, &key, &zone_args, &enforce, &side, 0);
}

bool ScriptBatch::add_lease(std::string_view key,
                            std::string_view zone_args,
                            std::uint64_t units, ZoneSide side) noexcept
{
    if (units > kMaxCost) {
        return false;
    }

    char head[1 + kMaxDigits + 1];
    std::size_t n = 0;
    head[n++] = kEntryLease;
    n += write_decimal(units, head + n);
    head[n++] = kNumbersEnd;

    bool enforce = true;
    return add_entry({head, n}, 1, &key, &zone_args, &enforce, &side,
                     kLeaseGrantReplies);
}

// Adds an entry of `head` followed by the byte of each of its `zones`
// zones; a zone new to the batch is described as it is met.
bool ScriptBatch::add_entry(std::string_view head, std::size_t zones,
                            const std::string_view *keys,
                            const std::string_view *zone_args,
                            const bool *enforce, const ZoneSide *sides,
                            std::size_t extra_elements) noexcept
{
    char entry[kMaxEntryHead + kMaxZonesPerRequest];
    std::memcpy(entry, head.data(), head.size());
    std::size_t known = described_.size();
    std::size_t keys_size = keys_.size();
    std::size_t zones_size = zones_.size();
    std::size_t entries_size = entries_.size();
    std::size_t markers_size = markers_.size();
    std::size_t side_zones = side_zones_;
    bool fits = true;

    try {
        for (std::size_t i = 0; i < zones; i++) {
            ZoneSide side = sides != nullptr ? sides[i] : ZoneSide{};
            std::size_t d = 0;

            while (d < described_.size()
                   && !described_as(described_[d], zone_args[i], enforce[i],
                                    side))
            {
                d++;
            }

            if (d == kMaxZoneDescriptors) {
                fits = false;
                break;
            }

            if (d == described_.size()) {
                describe(zone_args[i], enforce[i], side);
            }

            entry[head.size() + i] = static_cast<char>(d);
            append_bulk(keys_, keys[i]);
        }

        if (fits) {
            append_bulk(entries_, {entry, head.size() + zones});
            reply_offsets_.push_back(reply_elements());
        }
    } catch (const std::bad_alloc &) {
        fits = false;
    }

    if (!fits) {
        described_.resize(known);
        keys_.erase(keys_size);
        zones_.erase(zones_size);
        entries_.erase(entries_size);
        markers_.erase(markers_size);
        side_zones_ = side_zones;
        return false;
    }

    requests_++;
    key_count_ += zones;
    extra_elements_ += extra_elements;
    return true;
}

bool ScriptBatch::write_command(Form form, std::string *out,
                                bool cross_slot, bool packed) const noexcept
{
    char head[kMaxDigits + 3];
    char zones[kMaxDigits + 1];
    std::size_t zones_len = write_decimal(described_.size(), zones);
    std::size_t markers = cross_slot ? 0 : side_zones_;

    zones[zones_len++] = markers > 0
                         ? (packed ? kLayoutPackedMarked : kLayoutHashMarked)
                         : (packed ? kLayoutPacked : kLayoutHash);
    bool script = form != Form::kDecideCommand;
    std::size_t argc = (script ? 4 : 3) + key_count_ + markers
                       + described_.size() * kArgsPerZone + requests_
                       + (cross_slot ? 1 : 0);
    std::size_t n = put_head(head, '*', argc);

    try {
        out->assign(head, n);

        if (form == Form::kEval) {
            append_bulk(*out, "EVAL");
            append_bulk(*out, cross_slot ? cross_slot_script()
                                         : window_script());
        } else if (form == Form::kEvalSha) {
            append_bulk(*out, "EVALSHA");
            append_bulk(*out, cross_slot ? cross_slot_script_sha1()
                                         : window_script_sha1());
        } else {
            append_bulk(*out, kDecideCommand);
        }

        // No declared key: the key count leads ARGV instead.
        if (cross_slot) {
            append_decimal_bulk(*out, 0);
        }

        append_decimal_bulk(*out, key_count_ + markers);
        out->append(keys_);

        if (markers > 0) {
            out->append(markers_);
        }

        append_bulk(*out, {zones, zones_len});
        out->append(zones_).append(entries_);
    } catch (const std::bad_alloc &) {
        out->clear();
        return false;
    }

    return true;
}

void ScriptBatch::clear() noexcept
{
    keys_.clear();
    zones_.clear();
    entries_.clear();
    markers_.clear();
    described_.clear();
    reply_offsets_.clear();
    requests_ = 0;
    key_count_ = 0;
    side_zones_ = 0;
    extra_elements_ = 0;
}

}  // namespace ratelimit
