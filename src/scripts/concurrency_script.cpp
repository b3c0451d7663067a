#include "scripts/concurrency_script.hpp"

#include "base/sha1.hpp"
#include "scripts/resp_command.hpp"

namespace ratelimit {

namespace {

// See concurrency_script.hpp for the keys, the tokens and the reply.  Every
// call first drops what expired (leases past their end, waiters past their
// timeout) and gives free permits to the oldest waiters, so a permit freed by
// a lease running out goes to the queue at the next call on the subject,
// whoever makes it.  Both keys expire once nothing in them can still be
// alive: idle subjects cost nothing.
constexpr char kScript[] = R"lua(
local call = redis.call
local held, queue = KEYS[1], KEYS[2]
local op, token = ARGV[1], ARGV[2]
local limit, queue_limit = tonumber(ARGV[3]), tonumber(ARGV[4])
local lease, timeout = tonumber(ARGV[5]), tonumber(ARGV[6])
local time = call('TIME')
local now_us = time[1] * 1000000 + time[2]
local now = math.floor(now_us / 1000)
local fmt = string.format
local until_ms = fmt('%d', now + lease)

call('ZREMRANGEBYSCORE', held, '-inf', fmt('%d', now))
call('ZREMRANGEBYSCORE', queue, '-inf', fmt('(%d', now_us - timeout * 1000))

local function keep()
    local ttl = math.max(lease, timeout) + 1000
    call('PEXPIRE', held, ttl)
    call('PEXPIRE', queue, ttl)
end

local function promote(freed_us)
    local free = limit - call('ZCARD', held)
    if free <= 0 then
        return
    end
    local next = call('ZPOPMIN', queue, free)
    local freed = fmt('%d', freed_us)
    local key = ARGV[10]
    for i = 1, #next, 2 do
        call('ZADD', held, until_ms, next[i])
        local message = next[i] .. ' ' .. freed
        if key ~= '' then
            message = message .. ' '
                      .. redis.sha1hex(key .. ':' .. message .. ':' .. key)
        end
        call('PUBLISH', ARGV[7] .. string.match(next[i], '^[^.]*'), message)
    end
end

if op == 'r' then
    call('ZREM', held, token)
    call('ZREM', queue, token)
    local freed_us = tonumber(ARGV[9]) or 0
    promote(freed_us > 0 and freed_us or now_us)
    return {1, 0}
end

if op == 'n' then
    call('ZADD', held, until_ms, token)
    keep()
    return {1, 0}
end

promote(now_us)

if op == 's' then
    return {1, call('ZCARD', held), call('ZCARD', queue)}
end

if op == 'c' then
    local lease_end = call('ZSCORE', held, token)
    if lease_end then
        return {1, tonumber(lease_end) - lease}
    end
    local place = call('ZRANK', queue, token)
    if place then
        return {0, place + 1}
    end
    return {-1, 0}
end

local queued = call('ZCARD', queue)
if queued == 0 and call('ZCARD', held) < limit then
    call('ZADD', held, until_ms, token)
    keep()
    return {1, 0}
end
if queued >= queue_limit then
    return {-1, queued}
end
if ARGV[8] == '1' then
    return {2, queued + 1}
end
local score = now_us
local last = call('ZRANGE', queue, -1, -1, 'WITHSCORES')
if last[2] and tonumber(last[2]) >= score then
    score = tonumber(last[2]) + 1
end
call('ZADD', queue, fmt('%d', score), token)
keep()
return {0, queued + 1}
)lua";

struct ScriptDigest {
    char hex[kSha1HexLength];

    ScriptDigest() { sha1_hex(concurrency_script(), hex); }
};

std::string decimal(std::uint64_t n)
{
    return std::to_string(n);
}

bool read_integer(const Reply &element, long long *out)
{
    if (element.type != Reply::Type::kInteger) {
        return false;
    }

    *out = element.integer;
    return true;
}

}  // namespace

std::string_view concurrency_script()
{
    return {kScript, sizeof(kScript) - 1};
}

std::string_view concurrency_script_sha1()
{
    static const ScriptDigest digest;
    return {digest.hex, kSha1HexLength};
}

std::string held_key(std::string_view subject_key)
{
    std::string key;
    key.reserve(subject_key.size() + 7);
    key += '{';
    key += subject_key;
    key += "}:held";
    return key;
}

std::string format_permit_call(const PermitCall &call, bool eval)
{
    std::string held = held_key(call.subject_key);
    std::string queue = held.substr(0, held.size() - 4) + "queue";
    const ConcurrencyPolicy &p = *call.policy;
    std::string numbers[5] = {decimal(p.limit), decimal(p.queue),
                              decimal(p.lease_ms),
                              decimal(p.queue_timeout_ms),
                              decimal(call.freed_us)};
    char op = static_cast<char>(call.op);
    std::string_view script = eval ? concurrency_script()
                                   : concurrency_script_sha1();
    std::string_view argv[] = {
        eval ? "EVAL" : "EVALSHA", script, "2", held, queue,
        {&op, 1}, call.token, numbers[0], numbers[1], numbers[2],
        numbers[3], call.wake_prefix, call.dry_run ? "1" : "0", numbers[4],
        call.wake_key,
    };
    return format_command(argv);
}

void wakeup_signature(std::string_view wake_key, std::string_view message,
                      char out[kSha1HexLength])
{
    std::string text;
    text.reserve(2 * wake_key.size() + message.size() + 2);
    text.append(wake_key).append(1, ':').append(message).append(1, ':');
    text.append(wake_key);
    sha1_hex(text, out);
}

PermitReply decode_permit_reply(const Reply *reply)
{
    PermitReply out{PermitReply::Kind::kMalformed, PermitCode::kRefused, 0, 0,
                    {}};

    if (reply != nullptr && reply->type == Reply::Type::kError) {
        out.error = reply->text;
        out.kind = out.error.substr(0, 8) == "NOSCRIPT"
                   ? PermitReply::Kind::kNoScript : PermitReply::Kind::kError;
        return out;
    }

    long long code, number, queued = 0;

    if (reply == nullptr || reply->type != Reply::Type::kArray
        || reply->elements < 2 || reply->elements > 3
        || !read_integer(reply->element[0], &code)
        || !read_integer(reply->element[1], &number)
        || (reply->elements == 3 && !read_integer(reply->element[2], &queued))
        || code < -1 || code > 2 || number < 0 || queued < 0)
    {
        return out;
    }

    out.kind = PermitReply::Kind::kAnswer;
    out.code = static_cast<PermitCode>(code);
    out.number = static_cast<std::uint64_t>(number);
    out.queued = static_cast<std::uint64_t>(queued);
    return out;
}

}  // namespace ratelimit
