#include "report/dashboard_page.hpp"

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

TEST(DashboardPage, UrisArePathsTheHtmlTakesAsTheyAre)
{
    for (const char *uri : {"/metrics", "/", "/a/b-c_d.e~f", "/%7Eops",
                            "/x:y@z!$()*+,;="})
    {
        EXPECT_TRUE(dashboard_uri_ok(uri)) << uri;
    }

    for (const char *uri : {"", "metrics", "http://h/metrics", "/q?x=1",
                            "/a#b", "/a b", "/a\"b", "/a<b", "/a>b",
                            "/a&b", "/a'b", "/a\\b"})
    {
        EXPECT_FALSE(dashboard_uri_ok(uri)) << uri;
    }

    EXPECT_FALSE(dashboard_uri_ok(std::string_view("/a\0b", 4)));
}

TEST(DashboardPage, LinksStandInTheBody)
{
    std::string page = dashboard_page({"/m", "/rl", true, false});

    EXPECT_NE(page.find("<body data-metrics=\"/m\" data-status=\"/rl\" "
                        "data-forgive=\"on\"\n      data-override=\"off\">"),
              std::string::npos);
    EXPECT_EQ(page.find("@metrics@"), std::string::npos);
    EXPECT_EQ(page.find("@override@"), std::string::npos);
    EXPECT_EQ(page.rfind("</html>\n"), page.size() - 8);
}

// Nothing the page would load from elsewhere: no src= or href=, no CSS
// url() or @import, no address but SVG's namespace, which is a name.
TEST(DashboardPage, SelfContained)
{
    std::string page = dashboard_page({"/m", "/rl", false, false});

    for (const char *loads : {"src=", "href=", "url(", "@import", "https:"}) {
        EXPECT_EQ(page.find(loads), std::string::npos) << loads;
    }

    std::size_t at = page.find("http:");
    EXPECT_EQ(page.compare(at, 28, "http://www.w3.org/2000/svg\";"), 0);
    EXPECT_EQ(page.find("http:", at + 1), std::string::npos);
}

}  // namespace
}  // namespace ratelimit
