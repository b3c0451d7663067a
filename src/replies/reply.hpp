// A Redis reply as plain values: what the decoders of src/ read, so that
// they need no client library.  ngx_module/redis/ makes them as it reads a
// reply (redis/reply_arena.hpp), in memory it owns and reuses; the unit
// tests, from RESP bytes.  A Reply owns nothing: its text and its elements
// live as long as the reply they came in.
#pragma once

#include <cstddef>
#include <string_view>

namespace ratelimit {

struct Reply {
    enum class Type : unsigned char {
        kNil,      // a nil bulk string or array; what a Reply{} is
        kInteger,
        kString,   // a bulk string
        kStatus,   // a simple string ("+OK")
        kError,    // "-ERR ..."
        kArray,
    };

    Type type = Type::kNil;
    long long integer = 0;           // kInteger
    std::string_view text;           // kString, kStatus, kError
    const Reply *element = nullptr;  // kArray: its `elements` replies, in
    std::size_t elements = 0;        // a row (never null ones)
};

}  // namespace ratelimit
