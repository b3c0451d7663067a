#include "base/grpc_text.hpp"

#include <string>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

std::string message(std::string_view text)
{
    // One spare byte after the largest output catches a write past it.
    std::string out(grpc_message_size(text.size()) + 1, '#');
    out.resize(write_grpc_message(text, out.data()));
    return out;
}

struct TypeCase {
    const char *content_type;
    std::size_t media_type;  // its gRPC media type's length; 0: not gRPC
};

TEST(GrpcText, GrpcMediaTypes)
{
    static const TypeCase kCases[] = {
        {"application/grpc", 16},
        {"application/grpc+proto", 22},
        {"application/grpc+json", 21},
        {"application/grpc-web", 20},
        {"application/grpc-web+proto", 26},
        {"application/grpc-web-text", 25},
        {"application/grpc-web-text+proto", 31},
        {"Application/GRPC-Web", 20},
        // The media type ends before its parameters.
        {"application/grpc;charset=utf-8", 16},
        {"application/grpc+proto \t; x=y", 22},
        {"application/grpc ;", 16},
        // Not gRPC.
        {"", 0},
        {"application/json", 0},
        {"application/grp", 0},
        {"application/grpcx", 0},
        {"application/grpc-text", 0},
        {"application/grpc-we", 0},
        {" application/grpc", 0},
        {"text/plain; x=application/grpc", 0},
    };

    for (const TypeCase &c : kCases) {
        EXPECT_EQ(grpc_media_type(c.content_type), c.media_type)
            << c.content_type;
    }
}

TEST(GrpcText, MessagePrintableAsciiKept)
{
    EXPECT_EQ(message("rate limited by zone api-v1.2_x"),
              "rate limited by zone api-v1.2_x");
    EXPECT_EQ(message(" ~!\"'()*+,/:;<=>?@[\\]^`{|}"),
              " ~!\"'()*+,/:;<=>?@[\\]^`{|}");
}

TEST(GrpcText, MessagePercentAndOtherBytesEncoded)
{
    EXPECT_EQ(message("100%"), "100%25");
    EXPECT_EQ(message(std::string("a\nb\r\0\x1f\x7f", 7)),
              "a%0Ab%0D%00%1F%7F");
    EXPECT_EQ(message("caf\xc3\xa9"), "caf%C3%A9");
    std::string worst(4, '\xff');
    EXPECT_EQ(message(worst), "%FF%FF%FF%FF");
    EXPECT_EQ(message(worst).size(), grpc_message_size(4));
}

}  // namespace
}  // namespace ratelimit
