// The page `ratelimit_dashboard` serves: one HTML document, its style and
// script inline (no other file, font or script: it works offline), that
// fetches every 2 s the metrics location's JSON and the status location's
// top subjects (?zone=NAME&top=10), and asks the status location about one
// subject.  Where the two URIs are is written into <body> as
//   <body data-metrics="/metrics" data-status="/ratelimit"
//         data-forgive="on" data-override="off">
// which the script reads; forgive and override show the buttons that send
// DELETE and PUT to the status location.
#pragma once

#include <string>
#include <string_view>

namespace ratelimit {

struct DashboardLinks {
    std::string_view metrics;  // a `ratelimit_metrics` location's URI
    std::string_view status;   // a `ratelimit_query` location's URI
    bool forgive;              // the status location has delete=on
    bool override_limit;       // the status location has override=on
};

// True if `uri` may be one of the page's URIs: a path, "/" and then
// letters, digits and - . _ ~ % / : @ ! $ ( ) * + , ; = only (no query,
// no fragment, nothing the page's HTML would have to escape).
bool dashboard_uri_ok(std::string_view uri) noexcept;

// The page, with `links` (their URIs dashboard_uri_ok()) in its <body>.
// Throws std::bad_alloc.
std::string dashboard_page(const DashboardLinks &links);

}  // namespace ratelimit
