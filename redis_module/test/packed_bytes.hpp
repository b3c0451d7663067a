// A packed string's bytes written out by hand, for the tests to hold
// zones/packed_window.cpp to: not made by the code under test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ratelimit::test {

// `value` as `width` little-endian bytes.
inline std::string le(double value, std::size_t width)
{
    auto bits = static_cast<std::uint64_t>(value);
    std::string out;

    for (std::size_t i = 0; i < width; i++) {
        out += static_cast<char>(bits >> (8 * i) & 0xff);
    }

    return out;
}

// A sliding window's string of counts of width 1: the base, then each
// bucket's {number less the base, count}, then the total.
inline std::string sliding(double base,
                           const std::vector<std::vector<double>> &buckets,
                           double total)
{
    std::string out = le(1, 1) + le(base, 8);

    for (const std::vector<double> &bucket : buckets) {
        out += le(bucket[0], 2) + le(bucket[1], 1);
    }

    return out + le(total, 8);
}

}  // namespace ratelimit::test
