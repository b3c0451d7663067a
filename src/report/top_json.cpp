#include "report/top_json.hpp"

#include <cinttypes>
#include <cstdio>

#include "report/status_json.hpp"
#include "top/top_key.hpp"

namespace ratelimit {

namespace {

// A subject's object but its key: the numbers' longest text.
constexpr std::size_t kSubjectFixed = 128 + 2 * 20;

char *put(char *p, std::string_view text)
{
    for (char c : text) {
        *p++ = c;
    }

    return p;
}

char *put_number(char *p, const char *name, std::uint64_t n)
{
    return p + std::sprintf(p, "\"%s\":%" PRIu64, name, n);
}

char *put_subject(char *p, const TopSubject &s, std::uint64_t rejected)
{
    static constexpr char kHex[] = "0123456789abcdef";

    p = put(p, "{\"key\":\"");
    p += write_json_string(s.key, p);
    p = put(p, "\",\"key_hex\":\"");

    for (char c : s.key) {
        auto byte = static_cast<unsigned char>(c);
        *p++ = kHex[byte >> 4];
        *p++ = kHex[byte & 0xf];
    }

    p = put(p, "\",");
    p = put_number(p, "requests", s.requests);
    *p++ = ',';
    p = put_number(p, "rejected", s.rejected);
    // Thousandths, rounded: integers only, so no locale or float text.
    std::uint64_t share = rejected == 0
                          ? 0 : (s.rejected * 2000 + rejected) / (2 * rejected);
    return p + std::sprintf(p, ",\"share\":%" PRIu64 ".%03" PRIu64 "}",
                            share / 1000, share % 1000);
}

char *put_list(char *p, const char *name,
               const std::vector<TopSubject> &subjects,
               std::uint64_t rejected)
{
    p += std::sprintf(p, ",\"%s\":[", name);

    for (std::size_t i = 0; i < subjects.size(); i++) {
        if (i > 0) {
            *p++ = ',';
        }

        p = put_subject(p, subjects[i], rejected);
    }

    *p++ = ']';
    return p;
}

}  // namespace

std::size_t top_json_max_size(const TopReport &report)
{
    const TopAnswer &a = *report.answer;
    std::size_t subjects = a.by_rejected.size() + a.by_requests.size();

    return 256 + report.zone.size()
           + subjects * (kSubjectFixed + kTopKeyBytes * (6 + 2));
}

std::size_t write_top_json(const TopReport &report, char *out)
{
    const TopAnswer &a = *report.answer;
    char *p = put(out, "{\"zone\":\"");

    p = put(p, report.zone);
    p = put(p, "\",");
    p = put_number(p, "window", report.to - report.from);
    *p++ = ',';
    p = put_number(p, "from", report.from);
    *p++ = ',';
    p = put_number(p, "to", report.to);
    *p++ = ',';
    p = put_number(p, "requests", a.requests);
    *p++ = ',';
    p = put_number(p, "rejected", a.rejected);
    *p++ = ',';
    p = put_number(p, "error_bound",
                   a.error_q > a.error_j ? a.error_q : a.error_j);
    p = put_list(p, "top_rejected", a.by_rejected, a.rejected);
    p = put_list(p, "top_requests", a.by_requests, a.rejected);
    *p++ = '}';
    return static_cast<std::size_t>(p - out);
}

}  // namespace ratelimit
