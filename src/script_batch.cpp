#include "script_batch.hpp"

#include <cstring>
#include <new>

#include "rate_headers.hpp"
#include "window_script.hpp"

namespace ratelimit {

namespace {

// "$LEN\r\n" (a bulk string's header) or "*LEN\r\n" (an array's) into out,
// which holds kMaxDigits + 3 bytes; returns its size.
std::size_t put_head(char *out, char type, std::size_t len)
{
    out[0] = type;
    std::size_t n = 1 + write_decimal(len, out + 1);
    out[n++] = '\r';
    out[n++] = '\n';
    return n;
}

// "$LEN\r\nBYTES\r\n" into out, which holds kMaxDigits + 5 + bytes.size().
char *put_bulk(char *out, std::string_view bytes)
{
    out += put_head(out, '$', bytes.size());
    std::memcpy(out, bytes.data(), bytes.size());
    out += bytes.size();
    *out++ = '\r';
    *out++ = '\n';
    return out;
}

char *put_decimal_bulk(char *out, std::uint64_t value)
{
    char digits[kMaxDigits];
    return put_bulk(out, {digits, write_decimal(value, digits)});
}

void append_bulk(std::string &out, std::string_view bytes)
{
    char head[kMaxDigits + 3];
    out.append(head, put_head(head, '$', bytes.size()))
       .append(bytes)
       .append("\r\n", 2);
}

void append_decimal_bulk(std::string &out, std::uint64_t value)
{
    char digits[kMaxDigits];
    append_bulk(out, {digits, write_decimal(value, digits)});
}

constexpr std::string_view kCount = "$1\r\nc\r\n";
constexpr std::string_view kPeek = "$1\r\np\r\n";
constexpr std::string_view kEnforce = "$1\r\n1\r\n";
constexpr std::string_view kDryRun = "$1\r\n0\r\n";

}  // namespace

std::size_t write_zone_args(const Policy &policy, bool fixed, char *out)
{
    char *p = put_decimal_bulk(out, policy.limit);
    p = put_decimal_bulk(p, policy.bucket_ms);
    p = put_decimal_bulk(p, policy.buckets());
    p = put_bulk(p, fixed ? "f" : "s");
    return static_cast<std::size_t>(p - out);
}

bool ScriptBatch::add(bool peek, std::size_t zones,
                      const std::string_view *keys,
                      const std::string_view *zone_args,
                      const bool *enforce) noexcept
{
    std::size_t keys_size = keys_.size();
    std::size_t args_size = args_.size();

    try {
        args_.append(peek ? kPeek : kCount);
        append_decimal_bulk(args_, zones);

        for (std::size_t i = 0; i < zones; i++) {
            append_bulk(keys_, keys[i]);
            args_.append(zone_args[i]).append(enforce[i] ? kEnforce
                                                         : kDryRun);
        }
    } catch (const std::bad_alloc &) {
        keys_.erase(keys_size);
        args_.erase(args_size);
        return false;
    }

    entries_++;
    key_count_ += zones;
    arg_count_ += 2 + zones * kArgsPerZone;
    return true;
}

bool ScriptBatch::write_command(bool eval, std::string *out) const noexcept
{
    char head[kMaxDigits + 3];
    std::size_t n = put_head(head, '*', 3 + key_count_ + arg_count_);

    try {
        out->assign(head, n);
        append_bulk(*out, eval ? "EVAL" : "EVALSHA");
        append_bulk(*out, eval ? window_script() : window_script_sha1());
        append_decimal_bulk(*out, key_count_);
        out->append(keys_).append(args_);
    } catch (const std::bad_alloc &) {
        out->clear();
        return false;
    }

    return true;
}

void ScriptBatch::clear() noexcept
{
    keys_.clear();
    args_.clear();
    entries_ = 0;
    key_count_ = 0;
    arg_count_ = 0;
}

}  // namespace ratelimit
