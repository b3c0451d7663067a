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

TEST(GrpcText, GrpcMediaTypes)
{
    EXPECT_EQ(grpc_media_type("application/grpc"), 16u);
    EXPECT_EQ(grpc_media_type("application/grpc+proto"), 22u);
    EXPECT_EQ(grpc_media_type("application/grpc+json"), 21u);
    EXPECT_EQ(grpc_media_type("application/grpc-web"), 20u);
    EXPECT_EQ(grpc_media_type("application/grpc-web+proto"), 26u);
    EXPECT_EQ(grpc_media_type("application/grpc-web-text"), 25u);
    EXPECT_EQ(grpc_media_type("application/grpc-web-text+proto"), 31u);
    EXPECT_EQ(grpc_media_type("Application/GRPC-Web"), 20u);
}

TEST(GrpcText, MediaTypeEndsBeforeItsParameters)
{
    EXPECT_EQ(grpc_media_type("application/grpc;charset=utf-8"), 16u);
    EXPECT_EQ(grpc_media_type("application/grpc+proto \t; x=y"), 22u);
    EXPECT_EQ(grpc_media_type("application/grpc ;"), 16u);
}

TEST(GrpcText, OtherMediaTypesAreNotGrpc)
{
    EXPECT_EQ(grpc_media_type(""), 0u);
    EXPECT_EQ(grpc_media_type("application/json"), 0u);
    EXPECT_EQ(grpc_media_type("application/grp"), 0u);
    EXPECT_EQ(grpc_media_type("application/grpcx"), 0u);
    EXPECT_EQ(grpc_media_type("application/grpc-text"), 0u);
    EXPECT_EQ(grpc_media_type("application/grpc-we"), 0u);
    EXPECT_EQ(grpc_media_type(" application/grpc"), 0u);
    EXPECT_EQ(grpc_media_type("text/plain; x=application/grpc"), 0u);
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
