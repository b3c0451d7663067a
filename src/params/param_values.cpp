#include "params/param_values.hpp"

#include <limits>

namespace ratelimit {

namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kDayMs = 24 * 60 * 60 * 1000;

// The units of nginx's time syntax, largest first: a time names them
// largest first, each once.
enum TimeStep {
    kStart,
    kYear,
    kMonth,
    kWeek,
    kDay,
    kHour,
    kMinute,
    kSecond,
    kMillisecond,
    kLast
};

struct TimeUnit {
    TimeStep step;       // what the unit is
    TimeStep before;     // it may follow only units below this step
    std::int64_t ms;     // its length in milliseconds
};

// The unit at text[*pos], *pos moved past it; nothing for a character
// that is none.  Years and months are no unit in milliseconds: nginx
// starts its steps at months then.
std::optional<TimeUnit> read_time_unit(std::string_view text,
                                       std::size_t *pos)
{
    switch (text[(*pos)++]) {
    case 'w':
        return TimeUnit{kWeek, kWeek, 7 * kDayMs};
    case 'd':
        return TimeUnit{kDay, kDay, kDayMs};
    case 'h':
        return TimeUnit{kHour, kHour, 60 * 60 * 1000};
    case 'm':
        if (*pos < text.size() && text[*pos] == 's') {
            ++*pos;
            return TimeUnit{kMillisecond, kMillisecond, 1};
        }
        return TimeUnit{kMinute, kMinute, 60 * 1000};
    case 's':
        return TimeUnit{kSecond, kSecond, 1000};
    case ' ':
        // A number then a space is seconds, and nothing but a number of
        // seconds may follow.
        return TimeUnit{kLast, kSecond, 1000};
    default:
        return std::nullopt;
    }
}

}  // namespace

std::optional<std::uint64_t> parse_time_ms(std::string_view text)
{
    TimeStep step = kMonth;
    std::int64_t value = 0, total = 0;
    bool digits = false;
    std::size_t pos = 0;

    while (pos < text.size()) {
        char c = text[pos];

        if (c >= '0' && c <= '9') {
            if (value >= kMaxInt / 10
                && (value > kMaxInt / 10 || c - '0' > kMaxInt % 10))
            {
                return std::nullopt;
            }

            value = value * 10 + (c - '0');
            digits = true;
            pos++;
            continue;
        }

        auto unit = read_time_unit(text, &pos);

        if (!unit || step >= unit->before || value > kMaxInt / unit->ms) {
            return std::nullopt;
        }

        step = unit->step;
        value *= unit->ms;

        if (total > kMaxInt - value) {
            return std::nullopt;
        }

        total += value;
        value = 0;

        while (pos < text.size() && text[pos] == ' ') {
            pos++;
        }
    }

    // A number without a unit at the end is seconds.
    if (!digits || value > kMaxInt / 1000 || total > kMaxInt - value * 1000
        || total + value * 1000 == 0)
    {
        return std::nullopt;
    }

    return static_cast<std::uint64_t>(total + value * 1000);
}

std::optional<std::int64_t> parse_nginx_int(std::string_view text)
{
    std::int64_t value = 0;

    if (text.empty()) {
        return std::nullopt;
    }

    for (char c : text) {
        if (c < '0' || c > '9'
            || (value >= kMaxInt / 10
                && (value > kMaxInt / 10 || c - '0' > kMaxInt % 10)))
        {
            return std::nullopt;
        }

        value = value * 10 + (c - '0');
    }

    return value;
}

std::string quoted(std::string_view text)
{
    return '"' + std::string(text) + '"';
}

std::string invalid_param_text(std::string_view token)
{
    return "invalid parameter " + quoted(token);
}

std::string duplicate_param_text(std::string_view token)
{
    return "duplicate parameter " + quoted(token);
}

std::optional<std::string> take_named_param(const NamedParam *table,
                                            std::size_t size, unsigned form,
                                            std::string_view token,
                                            std::optional<std::string_view>
                                                *values)
{
    std::size_t eq = token.find('=');

    if (eq == std::string_view::npos) {
        return invalid_param_text(token);
    }

    std::string_view name = token.substr(0, eq);
    std::string_view value = token.substr(eq + 1);

    for (std::size_t i = 0; i < size; i++) {
        if (table[i].name != name || (table[i].forms & form) == 0) {
            continue;
        }

        if (values[i]) {
            return duplicate_param_text(token);
        }

        if (table[i].valid != nullptr && !table[i].valid(value)) {
            return invalid_param_text(token);
        }

        values[i] = value;
        return std::nullopt;
    }

    return invalid_param_text(token);
}

}  // namespace ratelimit
