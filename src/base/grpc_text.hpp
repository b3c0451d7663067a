// The text of a gRPC answer (https://github.com/grpc/grpc/blob/master/doc/
// PROTOCOL-HTTP2.md): which requests are gRPC calls, and grpc-message's
// percent-encoding.
#pragma once

#include <cstddef>
#include <string_view>

namespace ratelimit {

// The length of the media type of `content_type` (the value up to any ';',
// less the spaces and tabs before it) if it is gRPC's: "application/grpc"
// in any case, then nothing, '+' (application/grpc+proto) or "-web"
// (application/grpc-web, grpc-web+proto, grpc-web-text...); 0 if not.
std::size_t grpc_media_type(std::string_view content_type);

// grpc-message as gRPC percent-encodes it: bytes 0x20 to 0x7E but '%' kept,
// every other as %HH (upper-case hex).  `out` holds
// grpc_message_size(text.size()) bytes; returns the number written.
constexpr std::size_t grpc_message_size(std::size_t len)
{
    return len * 3;
}
std::size_t write_grpc_message(std::string_view text, char *out);

}  // namespace ratelimit
