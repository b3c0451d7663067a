#include "report/status_json.hpp"

#include <cstring>

#include "limits/algorithms.hpp"
#include "limits/rate_headers.hpp"
#include "limits/sliding_window.hpp"
#include "scripts/verdict.hpp"

namespace ratelimit {

namespace {

// Bytes of one object besides the zone name, the escaped subject, its
// type, its interval's note and its period's texts: the field names,
// punctuation, and fourteen numbers of at most kMaxDigits + 1 (seconds
// with milliseconds).
constexpr std::size_t kObjectOverhead = 300 + 14 * (kMaxDigits + 1);

char *append(char *out, std::string_view part)
{
    std::memcpy(out, part.data(), part.size());
    return out + part.size();
}

char *append_field(char *out, std::string_view name, std::uint64_t value)
{
    out = append(out, name);
    return out + write_decimal(value, out);
}

// `name` and `text`, a string that needs no escape, closed by '"';
// nothing for an empty text.
char *append_text(char *out, std::string_view name, std::string_view text)
{
    if (text.empty()) {
        return out;
    }

    out = append(out, name);
    out = append(out, text);
    *out++ = '"';
    return out;
}

// Milliseconds as seconds with three decimals: 1500 as 1.500.
char *append_seconds(char *out, std::string_view name, std::uint64_t ms)
{
    out = append_field(out, name, ms / 1000);
    *out++ = '.';
    *out++ = static_cast<char>('0' + ms / 100 % 10);
    *out++ = static_cast<char>('0' + ms / 10 % 10);
    *out++ = static_cast<char>('0' + ms % 10);
    return out;
}

// "override":N,"override_ttl":S (-1: never lapses) and, of a zone that
// takes turns, "override_rate":"Nr/s" (or /m, /h, /d).
char *append_override(char *p, const Override &o, bool rate)
{
    p = append_field(p, ",\"override\":", o.limit);
    p = o.left_ms > 0 ? append_field(p, ",\"override_ttl\":",
                                     seconds_ceil(o.left_ms))
                      : append(p, ",\"override_ttl\":-1");

    if (rate) {
        p = append_field(p, ",\"override_rate\":\"", o.limit);
        p = append(p, "r/");
        *p++ = rate_unit(o.window_ms);
        *p++ = '"';
    }

    return p;
}

char *append_rate_fields(char *p, const ZoneReport &z)
{
    p = append_text(p, ",\"type\":\"", z.type);
    p = append_field(p, ",\"limit\":", z.limit);
    p = append_field(p, ",\"used\":", z.used);
    p = append_field(p, ",\"remaining\":", z.remaining);
    p = append_field(p, ",\"window\":", z.window_s);
    p = append_field(p, ",\"reset\":", z.reset);
    p = append_field(p, ",\"retry_after\":", z.retry_after);
    p = append_text(p, ",\"period_start\":\"", z.period_start);
    p = append_text(p, ",\"period_end\":\"", z.period_end);

    if (z.takes_turns) {
        p = append_seconds(p, ",\"next_in\":", z.next_ms);
    }

    if (z.override.set) {
        p = append_override(p, z.override, z.takes_turns);
    }

    if (z.banned_ms > 0) {
        p = append_field(p, ",\"banned_for\":", seconds_ceil(z.banned_ms));
    }

    if (z.interval_ms > 0) {
        p = append_seconds(p, ",\"interval\":", z.interval_ms);
        p = append_seconds(p, ",\"interval_summed\":", z.summed_ms);
        p = append_field(p, ",\"count_in_interval\":", z.in_interval);
        p = append_text(p, ",\"interval_note\":\"", z.interval_note);
    }

    return p;
}

char *append_permit_fields(char *p, const ZoneReport &z)
{
    p = append(p, ",\"type\":\"concurrency\"");
    p = append_field(p, ",\"limit\":", z.limit);
    p = append_field(p, ",\"in_flight\":", z.in_flight);
    p = append_field(p, ",\"queued\":", z.queued);
    return append_field(p, ",\"queue_limit\":", z.queue_limit);
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 if none does.
std::size_t utf8_sequence(std::string_view s, std::size_t i)
{
    auto byte = [&](std::size_t k) {
        return static_cast<unsigned char>(s[k]);
    };
    auto continuation = [&](std::size_t k) {
        return k < s.size() && (byte(k) & 0xc0) == 0x80;
    };

    unsigned char c = byte(i);

    if (c >= 0xc2 && c <= 0xdf) {
        return continuation(i + 1) ? 2 : 0;
    }

    if (c >= 0xe0 && c <= 0xef) {
        if (!continuation(i + 1) || !continuation(i + 2)) {
            return 0;
        }
        unsigned char c1 = byte(i + 1);
        bool overlong = c == 0xe0 && c1 < 0xa0;
        bool surrogate = c == 0xed && c1 >= 0xa0;
        return overlong || surrogate ? 0 : 3;
    }

    if (c >= 0xf0 && c <= 0xf4) {
        if (!continuation(i + 1) || !continuation(i + 2)
            || !continuation(i + 3))
        {
            return 0;
        }
        unsigned char c1 = byte(i + 1);
        bool overlong = c == 0xf0 && c1 < 0x90;
        bool too_high = c == 0xf4 && c1 >= 0x90;
        return overlong || too_high ? 0 : 4;
    }

    return 0;
}

}  // namespace

ZoneReport report_zone(std::string_view zone, std::string_view subject,
                       const Policy &policy, const ZoneCount &count,
                       std::uint64_t now_ms)
{
    const AlgorithmRow &row = row_of(policy);
    ZoneStatus status = zone_status(policy, count, now_ms);
    std::uint64_t reset_s = seconds_ceil(status.reset_ms);
    ZoneReport report{zone,
                      subject,
                      status.limit,
                      row.used(policy, count.total),
                      status.remaining,
                      row.window_s(policy, now_ms),
                      seconds_ceil(now_ms + status.reset_ms),
                      status.remaining > 0 ? 0 : retry_after_seconds(reset_s)};

    report.type = row.named_in_status ? row.name : std::string_view();
    report.takes_turns = row.takes_turns;
    report.next_ms = row.takes_turns && count.over ? status.reset_ms : 0;
    report.override = count.override;
    report.banned_ms = count.ban_left_ms;
    return report;
}

ZoneReport report_permit_zone(std::string_view zone, std::string_view subject,
                              const ConcurrencyPolicy &policy,
                              std::uint64_t in_flight, std::uint64_t queued)
{
    ZoneReport report{};

    report.zone = zone;
    report.subject = subject;
    report.limit = policy.limit;
    report.concurrency = true;
    report.in_flight = in_flight;
    report.queued = queued;
    report.queue_limit = policy.queue;
    return report;
}

void report_interval(ZoneReport *report, const Policy &policy,
                     std::uint64_t interval_ms, const ZoneCount &count)
{
    const AlgorithmRow &row = row_of(policy);

    if (!row.answers_interval) {
        return;
    }

    report->interval_ms = interval_ms;
    report->summed_ms = SlidingWindow(policy).interval_buckets(interval_ms)
                        * policy.bucket_ms;
    report->in_interval = count.in_interval;
    report->interval_note = row.interval_note;
}

std::size_t write_json_string(std::string_view bytes, char *out)
{
    static const char digits[] = "0123456789abcdef";
    char *p = out;

    for (std::size_t i = 0; i < bytes.size(); i++) {
        auto c = static_cast<unsigned char>(bytes[i]);

        if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = static_cast<char>(c);
            continue;
        }

        if (c >= 0x20 && c < 0x7f) {
            *p++ = static_cast<char>(c);
            continue;
        }

        if (c >= 0x80) {
            std::size_t len = utf8_sequence(bytes, i);

            if (len > 0) {
                p = append(p, bytes.substr(i, len));
                i += len - 1;
                continue;
            }
        }

        p = append(p, "\\u00");
        *p++ = digits[c >> 4];
        *p++ = digits[c & 0xf];
    }

    return static_cast<std::size_t>(p - out);
}

std::size_t status_json_max_size(const ZoneReport *reports, std::size_t n)
{
    std::size_t size = 2;

    for (std::size_t i = 0; i < n; i++) {
        size += kObjectOverhead + reports[i].zone.size()
                + 6 * reports[i].subject.size() + reports[i].type.size()
                + reports[i].interval_note.size()
                + reports[i].period_start.size()
                + reports[i].period_end.size();
    }

    return size;
}

std::size_t write_status_json(const ZoneReport *reports, std::size_t n,
                              char *out)
{
    char *p = out;
    *p++ = '[';

    for (std::size_t i = 0; i < n; i++) {
        const ZoneReport &z = reports[i];

        if (i > 0) {
            *p++ = ',';
        }

        p = append(p, "{\"zone\":\"");
        p = append(p, z.zone);
        p = append(p, "\",\"key\":\"");
        p += write_json_string(z.subject, p);
        *p++ = '"';
        p = z.concurrency ? append_permit_fields(p, z)
                          : append_rate_fields(p, z);
        *p++ = '}';
    }

    *p++ = ']';
    return static_cast<std::size_t>(p - out);
}

}  // namespace ratelimit
