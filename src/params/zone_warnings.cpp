#include "params/zone_warnings.hpp"

#include "params/param_values.hpp"

namespace ratelimit {

namespace {

// The shortest bucket, in ms, that cuts `window_ms` into whole buckets, at
// most kMaxQuietBuckets of them.
std::uint64_t quiet_bucket_ms(std::uint64_t window_ms)
{
    for (std::uint64_t n = kMaxQuietBuckets; n > 1; n--) {
        if (window_ms % n == 0) {
            return window_ms / n;
        }
    }

    return window_ms;
}

char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// Whether `text` starts with `name`, as nginx compares variable names:
// without case.
bool starts_with_name(std::string_view text, std::string_view name)
{
    if (text.size() < name.size()) {
        return false;
    }

    for (std::size_t i = 0; i < name.size(); i++) {
        if (lower(text[i]) != lower(name[i])) {
            return false;
        }
    }

    return true;
}

// What nginx reads as a variable's name after a "$".
bool variable_name_chars(std::string_view text)
{
    for (char c : text) {
        char l = lower(c);

        if (!((l >= 'a' && l <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
            return false;
        }
    }

    return !text.empty();
}

bool names_variable(std::string_view text, const KnownVariables &known)
{
    for (std::string_view name : known.names) {
        if (name.size() == text.size() && starts_with_name(text, name)) {
            return true;
        }
    }

    for (std::string_view prefix : known.prefixes) {
        if (text.size() > prefix.size() && starts_with_name(text, prefix)) {
            return true;
        }
    }

    return false;
}

}  // namespace

std::vector<std::string> policy_warnings(const Policy &policy,
                                         std::string_view window,
                                         std::string_view bucket)
{
    std::vector<std::string> warnings;

    if (!bucket.empty() && policy.buckets() > kMaxQuietBuckets) {
        warnings.push_back(
            "bucket=" + std::string(bucket) + " cuts the window into "
            + std::to_string(policy.buckets()) + " buckets: a busy "
            "subject's Redis key holds a field for each, compact up to "
            + std::to_string(kMaxQuietBuckets) + "; use bucket="
            + std::to_string(quiet_bucket_ms(policy.window_ms))
            + "ms or longer");
    }

    if (!window.empty() && policy.window_ms > kMaxQuietWindowMs) {
        warnings.push_back(
            "window=" + std::string(window) + " keeps each subject's Redis "
            "key until a window after its last request: Redis holds every "
            "subject seen in that time; keep windows to 31d or less");
    }

    return warnings;
}

std::optional<std::string> literal_key_warning(std::string_view key,
                                               const KnownVariables &known)
{
    if (!variable_name_chars(key) || !names_variable(key, known)) {
        return std::nullopt;
    }

    return "key " + quoted(key) + " is a literal: every request shares one "
           "counter; did you mean " + quoted("$" + std::string(key)) + "?";
}

std::optional<std::string> client_value_warning(std::string_view param,
                                                std::string_view value)
{
    for (std::string_view prefix : {"http_", "arg_", "cookie_"}) {
        for (std::size_t at = value.find('$'); at != value.npos;
             at = value.find('$', at + 1))
        {
            std::string_view name = value.substr(at + 1);

            if (!name.empty() && name[0] == '{') {
                name.remove_prefix(1);
            }

            if (name.substr(0, prefix.size()) == prefix) {
                return std::string(param) + "=" + std::string(value)
                       + " takes a value the client sends: each client "
                         "chooses its own " + std::string(param)
                       + "; give it through a map that allows only the "
                         "values meant (docs/recipes.md)";
            }
        }
    }

    return std::nullopt;
}

}  // namespace ratelimit
