#include "zones/side_value.hpp"

#include <algorithm>

#include "limits/window_rules.hpp"
#include "protocol/batch_protocol.hpp"
#include "store/lua_number.hpp"

namespace ratelimit {

namespace {

// A run of decimal digits at the start of `text`, read into `out` and
// taken off `text`; false if there is none.
bool digits(std::string_view *text, double *out)
{
    std::size_t n = std::min(text->find_first_not_of("0123456789"),
                             text->size());

    // A run too long for to_number()'s copy (out of memory) reads as no
    // number, so no override: the limit stands.
    if (n == 0 || !lua::to_number(text->data(), n, out)) {
        return false;
    }

    text->remove_prefix(n);
    return true;
}

// Whether `text` is `code` and then what is taken off it.
bool take(std::string_view *text, char code)
{
    if (text->empty() || text->front() != code) {
        return false;
    }

    text->remove_prefix(1);
    return true;
}

// The first part of `value` that `form` takes, or false.
template <typename Form>
bool first_part(std::string_view value, Form form)
{
    for (;;) {
        std::size_t next = value.find(kSidePartNext);

        if (form(value.substr(0, next))) {
            return true;
        }

        if (next == value.npos) {
            return false;
        }

        value.remove_prefix(next + 1);
    }
}

// Whether `part` is exactly the override's form, its numbers into `o`.
bool override_part(std::string_view part, Override *o)
{
    return take(&part, kSideOverride) && take(&part, kSideTagEnd)
           && digits(&part, &o->limit) && take(&part, kNumberNext)
           && digits(&part, &o->window_ms) && take(&part, kNumberNext)
           && digits(&part, &o->lapse_ms) && part.empty();
}

}  // namespace

Override read_override(std::string_view value, double now_ms) noexcept
{
    constexpr auto kMost = static_cast<double>(window_rules::kMaxLimit);
    constexpr auto kLongest =
        static_cast<double>(window_rules::kMaxWindowMs);
    Override o{};

    if (!first_part(value, [&o](std::string_view part) {
            return override_part(part, &o);
        }))
    {
        return Override{};
    }

    o.in_force = o.limit <= kMost && o.window_ms >= 1
                 && o.window_ms <= kLongest && o.lapse_ms <= kMost
                 && (o.lapse_ms == 0 || o.lapse_ms > now_ms);
    return o.in_force ? o : Override{};
}

double read_ban(std::string_view value, double now_ms) noexcept
{
    constexpr auto kMost = static_cast<double>(window_rules::kMaxLimit);
    double end = 0;
    bool found = first_part(value, [&end](std::string_view part) {
        return take(&part, kSideBan) && take(&part, kSideTagEnd)
               && digits(&part, &end) && part.empty();
    });

    return found && end > now_ms && end <= kMost ? end : 0;
}

std::string with_ban(std::string_view value, double end_ms, bool *kept)
{
    std::string made;
    *kept = false;

    while (!value.empty()) {
        std::size_t next = std::min(value.find(kSidePartNext),
                                    value.size());
        std::string_view part = value.substr(0, next);
        bool ban = part.size() >= 2 && part[0] == kSideBan
                   && part[1] == kSideTagEnd;

        if (!part.empty() && !ban) {
            made.append(part).push_back(kSidePartNext);
            *kept = true;
        }

        value.remove_prefix(std::min(next + 1, value.size()));
    }

    char end[lua::kMaxText];
    made.push_back(kSideBan);
    made.push_back(kSideTagEnd);
    made.append(end, lua::format(end_ms, end));
    return made;
}

std::string side_key(std::string_view base, std::string_view key)
{
    std::string made(base);
    made.append(key.substr(std::min(base.size() - 1, key.size())));
    return made;
}

ZoneParams overridden(const ZoneParams &zone, const Override &o)
{
    ZoneParams applied = zone;
    applied.limit = o.limit;

    if (zone.gcra != 0 && o.limit != 0) {
        applied.gcra = o.window_ms * 1000 / o.limit;
    }

    return applied;
}

}  // namespace ratelimit
