#include "scripts/resp_command.hpp"

#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

TEST(FormatCommand, ArrayOfBulkStrings)
{
    std::string_view argv[] = {"SET", "k", ""};

    EXPECT_EQ(format_command(argv), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
}

// Words are bytes: CRLF and NUL inside one are counted, never escaped.
TEST(FormatCommand, BinaryWords)
{
    std::string word("a\r\n\0b", 5);
    std::string long_word(1000, 'x');
    std::string_view argv[] = {word, long_word};

    EXPECT_EQ(format_command(argv), "*2\r\n$5\r\n" + word + "\r\n$1000\r\n"
                                        + long_word + "\r\n");
    EXPECT_EQ(format_command(argv, 0), "*0\r\n");
}

}  // namespace
}  // namespace ratelimit
