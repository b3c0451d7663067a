// Redis key of a subject, and the subject as it may appear in a log line.
#pragma once

#include <cstddef>
#include <string_view>

#include "base/printable_text.hpp"

namespace ratelimit {

// Subjects longer than this are replaced by their SHA-1, so that a huge key
// (an 8 KB header, say) costs Redis no more than a short one.
constexpr std::size_t kMaxRawSubject = 256;

// In a Redis Cluster the keys of a subject carry a hash tag, so that its
// zones share a slot (one call decides them all).  The tag is not the
// subject, which a client picks (a header, an argument) and with it the
// slot: "a}x" and "a}y" would share the tag "a", and CRC16 is easy to
// search.  It is the first kHashTagLength hex digits of HMAC-SHA-1 of the
// subject under the fleet's tag secret: a client that does not know the
// secret cannot tell which of its subjects share a slot.  With no secret
// (empty) the digest is still a tag no '}' can cut, but one a client could
// search offline.
struct HashTag {
    std::string_view secret;  // the same on every server of the fleet
};
constexpr std::size_t kHashTagLength = 8;

// "PREFIX:ZONE:SUBJECT" with the subject's bytes as they are (binary-safe),
// or "PREFIX:ZONE#SHA1HEX" for a subject over kMaxRawSubject bytes.  Zone
// names cannot hold '#', so the two forms never collide.  With `tag`
// (Redis Cluster), "PREFIX:ZONE:{TAG}SUBJECT" or "PREFIX:ZONE#{TAG}SHA1HEX":
// zone names and, in cluster mode, the prefix hold no '{', so the tag is
// the first braces of the key.
std::size_t subject_key_size(std::string_view prefix, std::string_view zone,
                             std::string_view subject,
                             const HashTag *tag = nullptr);

// Writes the key into out, which holds subject_key_size() bytes; returns the
// number of bytes written.
std::size_t write_subject_key(std::string_view prefix, std::string_view zone,
                              std::string_view subject, char *out,
                              const HashTag *tag = nullptr);

// A zone's side key base, "PREFIX:ZONE+": what its side keys start with,
// the count key's bytes from the base's size on following it (the window
// script makes side keys so).  Alone, it is the zone's marker key, which
// exists while some subject of the zone may hold an override; in a Redis
// Cluster, where each slot has its own beside the side keys it holds, the
// base followed by a hash tag of the slot (cluster_slot.hpp's
// write_slot_tag()).
std::size_t side_base_size(std::string_view prefix, std::string_view zone);
std::size_t write_side_base(std::string_view prefix, std::string_view zone,
                            char *out);

// The side key of count key `key` in the zone of side key base `base` (not
// empty): what the zone keeps of the subject apart from its counts (a
// limit override set through the API).  `base`, then `key` from its byte
// #base on, 1-based, as the window script's base .. string.sub(key, #base)
// makes it: "rl:api+" and "rl:api:u" make "rl:api+:u", "rl:api#SHA1HEX"
// "rl:api+#SHA1HEX", and a tagged "rl:api:{TAG}u" "rl:api+:{TAG}u", the
// count key's tag, so that both sit in one Cluster slot.  Zone names cannot
// hold '+', so a side key never names a count key.  A key shorter than
// that (none of write_subject_key()'s) makes `base` alone, as string.sub()
// past the end does.  Writes it into out, which holds base.size() +
// key.size() bytes; returns the number of bytes written.
std::size_t write_side_key(std::string_view base, std::string_view key,
                           char *out);

// The subject as write_printable() shows it (base/printable_text.hpp), at
// most kMaxLoggedSubject bytes of it.  `out` holds
// printable_subject_max_size() bytes; returns the number written.
constexpr std::size_t kMaxLoggedSubject = 64;
constexpr std::size_t printable_subject_max_size()
{
    return printable_size(kMaxLoggedSubject);
}
std::size_t write_printable_subject(std::string_view subject, char *out);

}  // namespace ratelimit
