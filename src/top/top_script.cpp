#include "top/top_script.hpp"

#include "base/sha1.hpp"
#include "scripts/resp_command.hpp"

namespace ratelimit {

namespace {

// Counts are whole numbers below 2^53: Lua's numbers hold them exactly.
constexpr std::string_view kFlushScript = R"(
local i = 7
local last = 6 + 2 * tonumber(ARGV[6])
local set = KEYS[1]
while i < #ARGV do
    if i > last then set = KEYS[2] end
    redis.call('ZINCRBY', set, ARGV[i + 1], ARGV[i])
    i = i + 2
end
redis.call('HINCRBY', KEYS[3], 'requests', ARGV[2])
redis.call('HINCRBY', KEYS[3], 'rejected', ARGV[3])
redis.call('HINCRBY', KEYS[3], 'error_q', ARGV[4])
redis.call('HINCRBY', KEYS[3], 'error_j', ARGV[5])
redis.call('HINCRBY', KEYS[3], 'servers', 1)
for k = 1, 3 do redis.call('PEXPIRE', KEYS[k], ARGV[1]) end
return 1
)";

constexpr std::string_view kReadScript = R"(
local n = tonumber(ARGV[1])
local function sum(first)
    local t = {}
    for s = first, #KEYS, 3 do
        local r = redis.call('ZRANGE', KEYS[s], 0, -1, 'WITHSCORES')
        for i = 1, #r, 2 do
            t[r[i]] = (t[r[i]] or 0) + tonumber(r[i + 1])
        end
    end
    return t
end
local q, j = sum(1), sum(2)
local totals = {0, 0, 0, 0}
for s = 3, #KEYS, 3 do
    local h = redis.call('HMGET', KEYS[s], 'requests', 'rejected',
                         'error_q', 'error_j')
    for f = 1, 4 do totals[f] = totals[f] + (tonumber(h[f]) or 0) end
end
local function top(t)
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b)
        if t[a] ~= t[b] then return t[a] > t[b] end
        return a < b
    end)
    local out = {}
    for x = 1, math.min(n, #keys) do
        local k = keys[x]
        out[#out + 1] = k
        out[#out + 1] = q[k] or 0
        out[#out + 1] = j[k] or 0
    end
    return out
end
return {totals[1], totals[2], totals[3], totals[4], top(j), top(q)}
)";

struct Digests {
    char flush[kSha1HexLength];
    char read[kSha1HexLength];

    Digests()
    {
        sha1_hex(kFlushScript, flush);
        sha1_hex(kReadScript, read);
    }
};

const Digests &digests()
{
    static const Digests d;
    return d;
}

std::string slice_key(std::string_view base, std::uint64_t slice, char kind)
{
    std::string key(base);
    key += ':';
    key += std::to_string(slice);
    key += ':';
    key += kind;
    return key;
}

bool read_count(const Reply &reply, std::uint64_t *out)
{
    if (reply.type != Reply::Type::kInteger || reply.integer < 0) {
        return false;
    }

    *out = static_cast<std::uint64_t>(reply.integer);
    return true;
}

bool read_list(const Reply &reply, std::vector<TopSubject> *out)
{
    if (reply.type != Reply::Type::kArray || reply.elements % 3 != 0) {
        return false;
    }

    for (std::size_t i = 0; i < reply.elements; i += 3) {
        TopSubject subject;

        if (reply.element[i].type != Reply::Type::kString
            || !read_count(reply.element[i + 1], &subject.requests)
            || !read_count(reply.element[i + 2], &subject.rejected))
        {
            return false;
        }

        subject.key.assign(reply.element[i].text);
        out->push_back(std::move(subject));
    }

    return true;
}

}  // namespace

std::string top_base(std::string_view prefix, std::string_view zone,
                     bool cluster)
{
    std::string base;

    if (cluster) {
        base += '{';
    }

    base.append(prefix).append(1, ':').append(zone).append("!top");

    if (cluster) {
        base += '}';
    }

    return base;
}

std::string top_flush_call(const TopFlush &flush, bool eval)
{
    std::vector<std::string> numbers = {
        std::to_string(kTopKeepMs),       std::to_string(flush.requests),
        std::to_string(flush.rejected),   std::to_string(flush.error_q),
        std::to_string(flush.error_j),    std::to_string(flush.by_requests)};
    std::string q = slice_key(flush.base, flush.slice, 'q');
    std::string j = slice_key(flush.base, flush.slice, 'j');
    std::string t = slice_key(flush.base, flush.slice, 't');
    std::vector<std::string_view> argv = {
        eval ? "EVAL" : "EVALSHA",
        eval ? kFlushScript : std::string_view(digests().flush,
                                               kSha1HexLength),
        "3", q, j, t};

    for (const std::string &n : numbers) {
        argv.push_back(n);
    }

    std::vector<std::string> counts;
    counts.reserve(flush.counts.size());

    for (std::size_t i = 0; i < flush.keys.size(); i++) {
        counts.push_back(std::to_string(flush.counts[i]));
        argv.push_back(flush.keys[i]);
        argv.push_back(counts.back());
    }

    return format_command(argv.data(), argv.size());
}

std::string top_read_call(std::string_view base, std::uint64_t end,
                          std::uint64_t n, bool eval)
{
    std::vector<std::string> keys;
    keys.reserve(3 * kTopSlices);

    for (std::uint64_t s = 1; s <= kTopSlices; s++) {
        for (char kind : {'q', 'j', 't'}) {
            keys.push_back(slice_key(base, end - s * kTopSliceS, kind));
        }
    }

    std::string count = std::to_string(3 * kTopSlices);
    std::string top = std::to_string(n);
    std::vector<std::string_view> argv = {
        eval ? "EVAL" : "EVALSHA",
        eval ? kReadScript : std::string_view(digests().read,
                                              kSha1HexLength),
        count};

    for (const std::string &key : keys) {
        argv.push_back(key);
    }

    argv.push_back(top);
    return format_command(argv.data(), argv.size());
}

bool top_no_script(const Reply &reply)
{
    return reply.type == Reply::Type::kError
           && reply.text.substr(0, 8) == "NOSCRIPT";
}

TopReplyKind decode_top_read(const Reply &reply, TopAnswer *answer)
{
    if (top_no_script(reply)) {
        return TopReplyKind::kNoScript;
    }

    if (reply.type != Reply::Type::kArray || reply.elements != 6
        || !read_count(reply.element[0], &answer->requests)
        || !read_count(reply.element[1], &answer->rejected)
        || !read_count(reply.element[2], &answer->error_q)
        || !read_count(reply.element[3], &answer->error_j)
        || !read_list(reply.element[4], &answer->by_rejected)
        || !read_list(reply.element[5], &answer->by_requests))
    {
        return TopReplyKind::kError;
    }

    return TopReplyKind::kAnswer;
}

}  // namespace ratelimit
