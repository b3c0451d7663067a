#include "keys/subject_key.hpp"

#include <cstring>

#include "base/sha1.hpp"

namespace ratelimit {

namespace {

char *append(char *out, std::string_view part)
{
    std::memcpy(out, part.data(), part.size());
    return out + part.size();
}

}  // namespace

std::size_t subject_key_size(std::string_view prefix, std::string_view zone,
                             std::string_view subject, bool tagged)
{
    std::size_t tail = subject.size() > kMaxRawSubject ? kSha1HexLength
                                                       : subject.size();
    return prefix.size() + 1 + zone.size() + 1 + tail + (tagged ? 2 : 0);
}

std::size_t write_subject_key(std::string_view prefix, std::string_view zone,
                              std::string_view subject, char *out,
                              bool tagged)
{
    char *p = append(out, prefix);
    *p++ = ':';
    p = append(p, zone);
    *p++ = subject.size() > kMaxRawSubject ? '#' : ':';

    if (tagged) {
        *p++ = '{';
    }

    if (subject.size() > kMaxRawSubject) {
        sha1_hex(subject, p);
        p += kSha1HexLength;
    } else {
        p = append(p, subject);
    }

    if (tagged) {
        *p++ = '}';
    }

    return static_cast<std::size_t>(p - out);
}

std::size_t write_printable_subject(std::string_view subject, char *out)
{
    static const char digits[] = "0123456789abcdef";
    char *p = out;

    for (std::size_t i = 0; i < subject.size() && i < kMaxLoggedSubject; i++) {
        auto c = static_cast<unsigned char>(subject[i]);

        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            *p++ = static_cast<char>(c);
        } else {
            *p++ = '\\';
            *p++ = 'x';
            *p++ = digits[c >> 4];
            *p++ = digits[c & 0xf];
        }
    }

    if (subject.size() > kMaxLoggedSubject) {
        p = append(p, "...");
    }

    return static_cast<std::size_t>(p - out);
}

}  // namespace ratelimit
