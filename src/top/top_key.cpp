#include "top/top_key.hpp"

#include <cstring>

namespace ratelimit {

namespace {

constexpr std::uint64_t kFnvOffset = 14695981039346656037ULL;
constexpr std::uint64_t kFnvPrime = 1099511628211ULL;
constexpr std::string_view kCutMark = "...#";
constexpr std::size_t kHashDigits = 16;
constexpr std::size_t kKeptBytes = kTopKeyBytes - kCutMark.size()
                                   - kHashDigits;

}  // namespace

std::uint64_t top_key_hash(std::string_view bytes)
{
    std::uint64_t hash = kFnvOffset;

    for (char c : bytes) {
        hash = (hash ^ static_cast<unsigned char>(c)) * kFnvPrime;
    }

    return hash;
}

std::size_t write_top_key(std::string_view subject, char *out)
{
    if (subject.size() <= kTopKeyBytes) {
        std::memcpy(out, subject.data(), subject.size());
        return subject.size();
    }

    static constexpr char kHex[] = "0123456789abcdef";
    std::uint64_t hash = top_key_hash(subject);
    char *p = out;

    std::memcpy(p, subject.data(), kKeptBytes);
    p += kKeptBytes;
    std::memcpy(p, kCutMark.data(), kCutMark.size());
    p += kCutMark.size();

    for (std::size_t i = 0; i < kHashDigits; i++) {
        p[i] = kHex[(hash >> (60 - 4 * i)) & 0xf];
    }

    return kTopKeyBytes;
}

}  // namespace ratelimit
