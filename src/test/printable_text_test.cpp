#include "base/printable_text.hpp"

#include <string>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

std::string printable(std::string_view text, std::size_t max_shown)
{
    // One spare byte after the largest output catches a write past it.
    std::string out(printable_size(max_shown) + 1, '#');
    out.resize(write_printable(text, max_shown, out.data()));
    return out;
}

// A Redis error with a newline would start a line of its own in the log.
TEST(PrintableText, NoByteCanEndTheLineOrTheQuotes)
{
    EXPECT_EQ(printable("ERR x\n2026/11/25 [emerg] forged", 256),
              "ERR x\\x0a2026/11/25 [emerg] forged");
    EXPECT_EQ(printable(std::string("a\r\0\"\\\x7f\xff", 7), 256),
              "a\\x0d\\x00\\x22\\x5c\\x7f\\xff");
}

TEST(PrintableText, QuotesKeptOutsideQuotes)
{
    std::string out(printable_size(16), '#');
    out.resize(write_printable("a \"b\"\n", 16, out.data(), Quoted::kNo));
    EXPECT_EQ(out, "a \"b\"\\x0a");
}

TEST(PrintableText, CutAtMaxShown)
{
    EXPECT_EQ(printable("abcdef", 4), "abcd...");
    EXPECT_EQ(printable("abcd", 4), "abcd");
    std::string worst(5, '\n');
    EXPECT_EQ(printable(worst, 4).size(), printable_size(4));
}

}  // namespace
}  // namespace ratelimit
