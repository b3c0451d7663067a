#include "keys/subject_key.hpp"

#include <algorithm>
#include <cstring>

#include "base/sha1.hpp"

namespace ratelimit {

namespace {

char *append(char *out, std::string_view part)
{
    std::memcpy(out, part.data(), part.size());
    return out + part.size();
}

constexpr std::string_view kSideMark = "+";

}  // namespace

std::size_t subject_key_size(std::string_view prefix, std::string_view zone,
                             std::string_view subject, const HashTag *tag)
{
    std::size_t tail = subject.size() > kMaxRawSubject ? kSha1HexLength
                                                       : subject.size();
    std::size_t braces = tag != nullptr ? kHashTagLength + 2 : 0;
    return prefix.size() + 1 + zone.size() + 1 + braces + tail;
}

std::size_t write_subject_key(std::string_view prefix, std::string_view zone,
                              std::string_view subject, char *out,
                              const HashTag *tag)
{
    char *p = append(out, prefix);
    *p++ = ':';
    p = append(p, zone);
    *p++ = subject.size() > kMaxRawSubject ? '#' : ':';

    if (tag != nullptr) {
        *p++ = '{';
        p = digest_hex(hmac_sha1(tag->secret, subject), kHashTagLength, p);
        *p++ = '}';
    }

    if (subject.size() > kMaxRawSubject) {
        sha1_hex(subject, p);
        p += kSha1HexLength;
    } else {
        p = append(p, subject);
    }

    return static_cast<std::size_t>(p - out);
}

std::size_t side_base_size(std::string_view prefix, std::string_view zone)
{
    return prefix.size() + 1 + zone.size() + kSideMark.size();
}

std::size_t write_side_base(std::string_view prefix, std::string_view zone,
                            char *out)
{
    char *p = append(out, prefix);
    *p++ = ':';
    p = append(p, zone);
    return static_cast<std::size_t>(append(p, kSideMark) - out);
}

std::size_t write_side_key(std::string_view base, std::string_view key,
                           char *out)
{
    std::size_t from = std::min(base.size() - 1, key.size());
    char *p = append(out, base);
    return static_cast<std::size_t>(append(p, key.substr(from)) - out);
}

std::size_t write_printable_subject(std::string_view subject, char *out)
{
    return write_printable(subject, kMaxLoggedSubject, out);
}

}  // namespace ratelimit
