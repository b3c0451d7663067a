// The window script's text as the build assembled it from src/scripts/lua/
// (assemble.pl): stripped of its comments and placeholders, and Lua 5.1
// (Redis's) compiles it.
#include "scripts/window_script.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

// The exit status of luac -p (parse only) on `text`, its messages on the
// test's output.
int luac_parse(std::string_view text, const std::string &name)
{
    std::string path = testing::TempDir() + name;
    std::ofstream(path, std::ios::binary).write(text.data(), text.size());
    std::string command = std::string(RATELIMIT_LUAC) + " -p " + path;
    int status = std::system(command.c_str());
    std::remove(path.c_str());
    return status;
}

TEST(WindowScriptText, HoldsNoCommentNorPlaceholder)
{
    std::string_view script = window_script();

    EXPECT_EQ(script.find("--"), script.npos);
    EXPECT_EQ(script.find('@'), script.npos);
    EXPECT_EQ(script.find("\n\n\n"), script.npos);
}

TEST(WindowScriptText, CompilesAsLua51)
{
    EXPECT_EQ(luac_parse(window_script(), "window.lua"), 0);
    EXPECT_EQ(luac_parse(cross_slot_script(), "cross_slot.lua"), 0);
}

// The check above is real: the same text with one "end" too many is
// refused.
TEST(WindowScriptText, AnEndTooManyDoesNotCompile)
{
    std::string broken = std::string(window_script()) + "end\n";

    EXPECT_NE(luac_parse(broken, "broken.lua"), 0);
}

}  // namespace
}  // namespace ratelimit
