// Redis key of a subject, and the subject as it may appear in a log line.
#pragma once

#include <cstddef>
#include <string_view>

namespace ratelimit {

// Subjects longer than this are replaced by their SHA-1, so that a huge key
// (an 8 KB header, say) costs Redis no more than a short one.
constexpr std::size_t kMaxRawSubject = 256;

// "PREFIX:ZONE:SUBJECT" with the subject's bytes as they are (binary-safe),
// or "PREFIX:ZONE#SHA1HEX" for a subject over kMaxRawSubject bytes.  Zone
// names cannot hold '#', so the two forms never collide.  `tagged` (Redis
// Cluster) puts the subject or its digest in a hash tag,
// "PREFIX:ZONE:{SUBJECT}": the zones of one subject share a slot.  Zone
// names and, in cluster mode, the prefix hold no '{', so the tag is the
// subject's.
std::size_t subject_key_size(std::string_view prefix, std::string_view zone,
                             std::string_view subject, bool tagged = false);

// Writes the key into out, which holds subject_key_size() bytes; returns the
// number of bytes written.
std::size_t write_subject_key(std::string_view prefix, std::string_view zone,
                              std::string_view subject, char *out,
                              bool tagged = false);

// At most kMaxLoggedSubject bytes of input shown, printable ASCII kept, '"'
// and '\' and every other byte as \xHH, "..." appended when cut.  `out` holds
// printable_subject_max_size() bytes; returns the number written.
constexpr std::size_t kMaxLoggedSubject = 64;
constexpr std::size_t printable_subject_max_size()
{
    return kMaxLoggedSubject * 4 + 3;
}
std::size_t write_printable_subject(std::string_view subject, char *out);

}  // namespace ratelimit
