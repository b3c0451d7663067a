#include "zones/packed_window.hpp"

#include <cstdint>

namespace ratelimit {

namespace {

double get(const char *at, std::size_t width)
{
    std::uint64_t value = 0;

    for (std::size_t i = width; i > 0; i--) {
        value = value << 8 | static_cast<unsigned char>(at[i - 1]);
    }

    return static_cast<double>(value);
}

bool width_valid(std::size_t width)
{
    return width == 1 || width == 2 || width == 4 || width == 8;
}

}  // namespace

void packed_put(char *at, double value, std::size_t width)
{
    auto bits = static_cast<std::uint64_t>(value);

    for (std::size_t i = 0; i < width; i++) {
        at[i] = static_cast<char>(bits >> (8 * i) & 0xff);
    }
}

std::size_t packed_width(double count)
{
    return count < 256 ? 1 : count < 65536 ? 2 : count < 4294967296.0 ? 4
                                                                        : 8;
}

bool packed_read(std::string_view bytes, bool fixed, PackedWindow *out)
{
    out->buckets.clear();

    if (fixed) {
        if (bytes.size() != kPackedFixed) {
            return false;
        }

        out->total = get(bytes.data() + 8, 8);
        out->buckets.push_back({get(bytes.data(), 8), out->total});
        return true;
    }

    if (bytes.size() < kPackedHead + kPackedTotal
        || !width_valid(static_cast<unsigned char>(bytes[0])))
    {
        return false;
    }

    std::size_t entries = bytes.size() - kPackedHead - kPackedTotal;
    out->width = static_cast<unsigned char>(bytes[0]);
    std::size_t step = 2 + out->width;

    if (entries == 0 || entries % step != 0) {
        return false;
    }

    out->base = get(bytes.data() + 1, 8);
    out->total = get(bytes.data() + bytes.size() - kPackedTotal,
                     kPackedTotal);

    for (std::size_t at = kPackedHead; at < kPackedHead + entries;
         at += step)
    {
        out->buckets.push_back({out->base + get(bytes.data() + at, 2),
                                get(bytes.data() + at + 2, out->width)});
    }

    return true;
}

void packed_write(PackedWindow *w, bool fixed, std::string *out)
{
    if (fixed) {
        out->assign(kPackedFixed, '\0');
        packed_put(&(*out)[0], w->newest(), 8);
        packed_put(&(*out)[8], w->total, 8);
        return;
    }

    for (const PackedBucket &bucket : w->buckets) {
        std::size_t width = packed_width(bucket.count);
        w->width = width > w->width ? width : w->width;
    }

    if (w->oldest() < w->base
        || w->newest() - w->base >= kMostPackedBuckets)
    {
        w->base = w->oldest();
    }

    std::size_t step = 2 + w->width;
    out->assign(kPackedHead + step * w->buckets.size() + kPackedTotal, '\0');
    char *at = &(*out)[0];
    at[0] = static_cast<char>(w->width);
    packed_put(at + 1, w->base, 8);
    at += kPackedHead;

    for (const PackedBucket &bucket : w->buckets) {
        packed_put(at, bucket.id - w->base, 2);
        packed_put(at + 2, bucket.count, w->width);
        at += step;
    }

    packed_put(at, w->total, kPackedTotal);
}

std::size_t packed_newest_at(const PackedWindow &w, bool fixed)
{
    return fixed ? 8
                 : kPackedHead + (2 + w.width) * w.buckets.size()
                       - w.width;
}

}  // namespace ratelimit
