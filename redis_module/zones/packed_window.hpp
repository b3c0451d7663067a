// A window zone's key in the packed layout (docs/performance.md, "The
// string, as it is to be built"): one string a subject, which the command
// reads and changes in place and the script reads with GET and writes with
// SETRANGE or SET ... PXAT (scripts/lua/window.lua).  Its bytes, and the
// rules both paths follow so that they leave the same ones.
//
// Little-endian unsigned integers.  Sliding: a byte, the width of a count
// (1, 2, 4 or 8 bytes), the base bucket number (8), then per live bucket,
// oldest first, its number less the base (2) and its count (the width),
// last the total (8).  Fixed: the window's number and its count (8 each).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ratelimit {

// A window's buckets as numbers: exact to 2^53, as the script's are.
struct PackedBucket {
    double id;
    double count;
};

struct PackedWindow {
    std::size_t width = 1;  // bytes a count (sliding)
    double base = 0;        // bucket numbers are stored less it (sliding)
    std::vector<PackedBucket> buckets;  // oldest first; fixed: its window
    double total = 0;       // the counts' sum, as written

    double oldest() const { return buckets.front().id; }
    double newest() const { return buckets.back().id; }

    // As a new key's: no bucket, counts of 1 byte, base 0.
    void clear()
    {
        width = 1;
        base = total = 0;
        buckets.clear();
    }
};

// Bucket numbers are stored in 2 bytes less the base: a sliding zone of
// more buckets than this makes its new keys hashes, and reads a string as
// another bucket length's.
constexpr double kMostPackedBuckets = 65536;

// Whether a window zone's new keys may be packed strings.
constexpr bool packed_fits(bool fixed, double span)
{
    return fixed || span <= kMostPackedBuckets;
}

constexpr std::size_t kPackedHead = 9;    // width, base
constexpr std::size_t kPackedTotal = 8;
constexpr std::size_t kPackedFixed = 16;  // window, count

// Reads `bytes` as a zone's string into `out`: false where it is none
// (its length or width not the layout's; no live bucket).
bool packed_read(std::string_view bytes, bool fixed, PackedWindow *out);

// The smallest width that holds `count`.
std::size_t packed_width(double count);

// Makes `w` the string it stands for, exactly, into `out`: its width the
// smallest that holds every count, never narrower than it was; its base
// the oldest bucket where that is older, or where the newest is
// kMostPackedBuckets or more past it.
void packed_write(PackedWindow *w, bool fixed, std::string *out);

// Where the newest bucket's count starts in the string of `w`, and how
// many bytes from there to the end hold it and the total (fixed: the
// count alone).
std::size_t packed_newest_at(const PackedWindow &w, bool fixed);

// `value` as `width` bytes at `at`.
void packed_put(char *at, double value, std::size_t width);

}  // namespace ratelimit
