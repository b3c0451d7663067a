#include "base/grpc_text.hpp"

namespace ratelimit {

namespace {

bool same_ascii_case(std::string_view a, std::string_view b)
{
    if (a.size() != b.size()) {
        return false;
    }

    for (std::size_t i = 0; i < a.size(); i++) {
        char c = a[i];
        char lower = c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;

        if (lower != b[i]) {
            return false;
        }
    }

    return true;
}

}  // namespace

std::size_t grpc_media_type(std::string_view content_type)
{
    static constexpr std::string_view kGrpc = "application/grpc";
    static constexpr std::string_view kWeb = "-web";

    std::size_t len = content_type.find(';');
    len = len == std::string_view::npos ? content_type.size() : len;

    while (len > 0
           && (content_type[len - 1] == ' ' || content_type[len - 1] == '\t'))
    {
        len--;
    }

    std::string_view type = content_type.substr(0, len);

    if (type.size() < kGrpc.size()
        || !same_ascii_case(type.substr(0, kGrpc.size()), kGrpc))
    {
        return 0;
    }

    std::string_view rest = type.substr(kGrpc.size());
    bool grpc = rest.empty() || rest[0] == '+'
                || same_ascii_case(rest.substr(0, kWeb.size()), kWeb);
    return grpc ? len : 0;
}

std::size_t write_grpc_message(std::string_view text, char *out)
{
    static const char kDigits[] = "0123456789ABCDEF";
    char *p = out;

    for (char ch : text) {
        auto c = static_cast<unsigned char>(ch);

        if (c >= 0x20 && c <= 0x7e && c != '%') {
            *p++ = ch;
            continue;
        }

        *p++ = '%';
        *p++ = kDigits[c >> 4];
        *p++ = kDigits[c & 0xf];
    }

    return static_cast<std::size_t>(p - out);
}

}  // namespace ratelimit
