#include "calendar/tzif_reader.hpp"

#include <cstddef>

namespace ratelimit {

namespace {

constexpr std::size_t kHeaderSize = 44;
constexpr std::size_t kTypeSize = 6;     // utoff (4), isdst, desigidx
constexpr std::uint32_t kMaxTypes = 256; // a transition's type is a byte

struct TzifHeader {
    char version;                        // '\0' (1), '2', '3' or '4'
    std::uint32_t isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt;
};

// Bytes taken from the front of a file.
struct ByteReader {
    std::string_view bytes;
    std::size_t pos;

    // The next n bytes into *out; false if fewer are left.
    bool take(std::uint64_t n, std::string_view *out)
    {
        if (n > bytes.size() - pos) {
            return false;
        }
        *out = bytes.substr(pos, n);
        pos += n;
        return true;
    }
};

// An unsigned big-endian number of up to 8 bytes.
std::uint64_t big_endian(std::string_view b)
{
    std::uint64_t v = 0;

    for (char c : b) {
        v = v << 8 | static_cast<unsigned char>(c);
    }
    return v;
}

const char *read_header(ByteReader *r, TzifHeader *h)
{
    std::string_view b;

    if (!r->take(kHeaderSize, &b)) {
        return "truncated header";
    }
    if (b.substr(0, 4) != "TZif") {
        return "not a TZif file";
    }
    h->version = b[4];
    if (h->version != '\0' && (h->version < '2' || h->version > '4')) {
        return "unknown TZif version";
    }

    std::uint32_t *counts[] = {&h->isutcnt, &h->isstdcnt, &h->leapcnt,
                               &h->timecnt, &h->typecnt, &h->charcnt};
    for (std::size_t i = 0; i < 6; i++) {
        *counts[i] = static_cast<std::uint32_t>(
            big_endian(b.substr(20 + 4 * i, 4)));
    }
    return nullptr;
}

// The bytes of the data block after a header, with times of time_size
// bytes (4 in version 1's block, 8 in the later).
std::uint64_t block_size(const TzifHeader &h, std::size_t time_size)
{
    return std::uint64_t{h.timecnt} * (time_size + 1)
           + std::uint64_t{h.typecnt} * kTypeSize + h.charcnt
           + std::uint64_t{h.leapcnt} * (time_size + 4)
           + h.isstdcnt + h.isutcnt;
}

const char *check_counts(const TzifHeader &h)
{
    if (h.typecnt == 0 || h.typecnt > kMaxTypes) {
        return "local time type count not 1 to 256";
    }
    if (h.charcnt == 0) {
        return "no time zone abbreviations";
    }
    if ((h.isstdcnt != 0 && h.isstdcnt != h.typecnt)
        || (h.isutcnt != 0 && h.isutcnt != h.typecnt))
    {
        return "standard/UT indicator count not the type count";
    }
    if (h.leapcnt != 0) {
        return "leap second records (a right/ zone) are not supported";
    }
    if (h.timecnt > kMaxTransitions) {
        return "more than 4096 transitions";
    }
    return nullptr;
}

// The local time types' offsets, from their records.
const char *read_types(std::string_view records, const TzifHeader &h,
                       std::vector<std::int32_t> *offsets)
{
    offsets->reserve(h.typecnt);
    for (std::size_t i = 0; i < h.typecnt; i++) {
        std::string_view rec = records.substr(i * kTypeSize, kTypeSize);
        auto offset = static_cast<std::int32_t>(
            static_cast<std::uint32_t>(big_endian(rec.substr(0, 4))));

        if (offset <= -kOffsetLimit || offset >= kOffsetLimit) {
            return "local time type offset out of range";
        }
        if (static_cast<unsigned char>(rec[4]) > 1
            || static_cast<unsigned char>(rec[5]) >= h.charcnt)
        {
            return "bad local time type";
        }
        offsets->push_back(offset);
    }
    return nullptr;
}

// A time of 4 or 8 bytes, signed.
std::int64_t signed_time(std::string_view b)
{
    std::uint64_t v = big_endian(b);

    if (b.size() == 4) {
        return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
    }
    return static_cast<std::int64_t>(v);
}

const char *read_changes(std::string_view times, std::size_t time_size,
                         std::string_view types,
                         const std::vector<std::int32_t> &offsets,
                         std::vector<OffsetChange> *changes)
{
    changes->reserve(types.size());
    for (std::size_t i = 0; i < types.size(); i++) {
        std::int64_t at = signed_time(times.substr(i * time_size,
                                                   time_size));
        auto type = static_cast<unsigned char>(types[i]);

        if (!changes->empty() && at <= changes->back().at_s) {
            return "transitions not in ascending order";
        }
        if (type >= offsets.size()) {
            return "transition to an unknown local time type";
        }
        changes->push_back({at, offsets[type]});
    }
    return nullptr;
}

// The data block after header h into *rules; the leap second and
// indicator records are not read (there are no leap seconds: see
// check_counts(); the indicators only serve a TZ string without a rule).
const char *read_block(ByteReader *r, const TzifHeader &h,
                       std::size_t time_size, ZoneRules *rules)
{
    std::string_view times, types, records, unread;
    std::vector<std::int32_t> offsets;

    if (const char *bad = check_counts(h)) {
        return bad;
    }
    if (!r->take(std::uint64_t{h.timecnt} * time_size, &times)
        || !r->take(h.timecnt, &types)
        || !r->take(std::uint64_t{h.typecnt} * kTypeSize, &records)
        || !r->take(h.charcnt + std::uint64_t{h.isstdcnt} + h.isutcnt,
                    &unread))
    {
        return "truncated data block";
    }

    if (const char *bad = read_types(records, h, &offsets)) {
        return bad;
    }
    rules->initial_offset_s = offsets[0];
    return read_changes(times, time_size, types, offsets, &rules->changes);
}

// "\nTZ string\n"; an empty one is none.
const char *read_footer(ByteReader *r, ZoneRules *rules,
                        std::string *error)
{
    std::string_view newline, rest = r->bytes.substr(r->pos);
    std::size_t end = rest.find('\n', 1);

    if (!r->take(1, &newline) || newline != "\n"
        || end == std::string_view::npos)
    {
        return "no footer";
    }
    if (end > 1) {
        rules->footer = parse_posix_tz(rest.substr(1, end - 1), error);
        if (!rules->footer) {
            return "bad footer";
        }
    }
    return nullptr;
}

// Version 2 and later: past the 32-bit block, which is for old readers,
// to the second header, of the same version.
const char *skip_version1(ByteReader *r, TzifHeader *h)
{
    std::string_view block;
    char version = h->version;

    if (!r->take(block_size(*h, 4), &block)) {
        return "truncated version 1 data block";
    }
    if (const char *bad = read_header(r, h)) {
        return bad;
    }
    return h->version == version ? nullptr : "second header's version differs";
}

}  // namespace

std::optional<ZoneRules> read_tzif(std::string_view bytes,
                                   std::string *error)
{
    ByteReader r{bytes, 0};
    TzifHeader h;
    ZoneRules rules{0, {}, std::nullopt};
    std::string why;
    const char *bad = read_header(&r, &h);
    bool v1 = bad == nullptr && h.version == '\0';

    if (bad == nullptr && !v1) {
        bad = skip_version1(&r, &h);
    }
    if (bad == nullptr) {
        bad = read_block(&r, h, v1 ? 4 : 8, &rules);
    }
    if (bad == nullptr && !v1) {
        bad = read_footer(&r, &rules, &why);
    }

    if (bad != nullptr) {
        *error = why.empty() ? bad : std::string(bad) + ": " + why;
        return std::nullopt;
    }
    return rules;
}

}  // namespace ratelimit
