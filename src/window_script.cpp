#include "window_script.hpp"

#include <cstring>

namespace ratelimit {

namespace {

// Each key is a hash.  Sliding window: "t" the count of the live buckets,
// "o" the oldest non-empty bucket, "n" the newest one, and one field per
// non-empty bucket, named by its absolute number, holding its count.
// Buckets older than the window are deleted as the window slides past them,
// each exactly once, so the work per call does not grow with the number of
// buckets in a window; "t" saves summing them.  Fixed window: "t" the count
// and "n" the window's number.  Either way the key expires when its newest
// count leaves the window, so idle subjects cost nothing, and a key written
// under another algorithm or bucket length is recognised and started afresh.
//
// A request that does not fit in an enforced zone is counted in no zone.  A
// request that passes is counted in every zone it fits in; a dry-run zone it
// does not fit in does not count it, as if it had been rejected there.
constexpr char kScript[] = R"lua(
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)

local function drop(key, ids)
    for i = 1, #ids, 256 do
        redis.call('HDEL', key, unpack(ids, i, math.min(i + 255, #ids)))
    end
end

-- Deletes the buckets of `key` older than `first` and returns the new count
-- and oldest bucket.  `oldest` and `newest` are non-empty, newest >= first.
-- Steps through bucket numbers from `oldest`, 16 at a time; past 64 numbers
-- the live buckets are sparse, and reading the hash once is cheaper.  So a
-- call costs at most 4 reads, or one read of the live fields: never the
-- number of buckets in a window.
local function slide(key, count, oldest, newest, first)
    local gone = {}
    local at = oldest
    for _ = 1, 4 do
        local ids = {}
        for id = at, math.min(at + 15, newest) do
            ids[#ids + 1] = id
        end
        local counts = redis.call('HMGET', key, unpack(ids))
        for j = 1, #ids do
            if counts[j] then
                if ids[j] >= first then
                    drop(key, gone)
                    return count, ids[j]
                end
                count = count - tonumber(counts[j])
                gone[#gone + 1] = ids[j]
            end
        end
        at = ids[#ids] + 1
    end
    drop(key, gone)
    gone = {}
    local all = redis.call('HGETALL', key)
    local next = newest
    for j = 1, #all, 2 do
        local id = tonumber(all[j])
        if id and id < first then
            count = count - tonumber(all[j + 1])
            gone[#gone + 1] = all[j]
        elseif id and id < next then
            next = id
        end
    end
    drop(key, gone)
    return count, next
end

-- The bucket to count in: `newest` when Redis's clock has stepped back by
-- at most a window since it was written (a failover to a replica, an NTP
-- step), so that counts made "in the future" still count; else current.
-- A larger gap means the key was written under another bucket length: the
-- zone starts afresh below.
local function ahead(current, newest, span)
    if newest and newest > current and newest - current <= span then
        return newest
    end
    return current
end

-- Decides one request, in `zones` zones: its keys are KEYS[k] on, its zones'
-- arguments ARGV[a] on, kArgsPerZone of them per zone.
local function decide(k, a, zones, counting)
    local rejected = 0
    -- Per zone, kept flat (no table per zone): count, oldest, newest,
    -- count of the current bucket, whether the script slid the window,
    -- current bucket.
    local st = {}

    for i = 1, zones do
        local key = KEYS[k + i - 1]
        local z = a + (i - 1) * 5
        local width = tonumber(ARGV[z + 1])
        local span = tonumber(ARGV[z + 2])
        local current = math.floor(now / width)
        local count, oldest, newest, here, slid = 0, 0, 0, 0, false

        if ARGV[z + 3] == 'f' then
            local h = redis.call('HMGET', key, 't', 'n')
            current = ahead(current, tonumber(h[2]), span)
            if tonumber(h[2]) == current and tonumber(h[1]) then
                count, oldest, newest = tonumber(h[1]), current, current
            elseif h[1] or h[2] then
                redis.call('DEL', key)
            end
        else
            local h = redis.call('HMGET', key, 't', 'o', 'n', current)
            local c, o, n = tonumber(h[1]), tonumber(h[2]), tonumber(h[3])
            if n and n > current and ahead(current, n, span) == n then
                current = n
                h[4] = redis.call('HGET', key, current)
            end
            local first = current - span + 1
            if c and o and n and n >= first and n <= current then
                count, oldest, newest = c, o, n
                here = tonumber(h[4]) or 0
                if oldest < first then
                    count, oldest = slide(key, count, oldest, newest, first)
                    slid = true
                end
            elseif h[1] or h[2] or h[3] then
                redis.call('DEL', key)
            end
        end

        if count + 1 > tonumber(ARGV[z]) and ARGV[z + 4] == '1' then
            rejected = 1
        end
        local s = (i - 1) * 6
        st[s + 1], st[s + 2], st[s + 3] = count, oldest, newest
        st[s + 4], st[s + 5], st[s + 6] = here, slid, current
    end

    local reply = {now, rejected}
    local r = 2

    for i = 1, zones do
        local key = KEYS[k + i - 1]
        local z = a + (i - 1) * 5
        local s = (i - 1) * 6
        local count, oldest, newest = st[s + 1], st[s + 2], st[s + 3]
        local here, slid, current = st[s + 4], st[s + 5], st[s + 6]
        local over = count + 1 > tonumber(ARGV[z])

        if counting and rejected == 0 and not over then
            local fixed = ARGV[z + 3] == 'f'
            if newest == current and fixed then
                redis.call('HSET', key, 't', count + 1)
            elseif newest == current and slid then
                redis.call('HSET', key, current, here + 1, 't', count + 1,
                           'o', oldest)
            elseif newest == current then
                redis.call('HSET', key, current, here + 1, 't', count + 1)
            else
                if oldest == 0 then
                    oldest = current
                end
                if fixed then
                    redis.call('HSET', key, 't', count + 1, 'n', current)
                else
                    redis.call('HSET', key, current, 1, 't', count + 1,
                               'o', oldest, 'n', current)
                end
                redis.call('PEXPIREAT', key,
                           (current + tonumber(ARGV[z + 2]))
                           * tonumber(ARGV[z + 1]))
            end
            count = count + 1
        elseif slid then
            redis.call('HSET', key, 't', count, 'o', oldest)
        end
        reply[r + 1], reply[r + 2], reply[r + 3] = count, oldest,
                                                  over and 1 or 0
        r = r + 3
    end

    return reply
end

-- The requests one after another, as if each were its own call, but at one
-- Redis time.  An error (a key of another type, OOM) is that request's
-- reply: the others are still decided.
local replies = {}
local k, a = 1, 1

while a <= #ARGV do
    local zones = tonumber(ARGV[a + 1])
    local ok, reply = pcall(decide, k, a + 2, zones, ARGV[a] == 'c')
    if not ok and type(reply) ~= 'table' then
        reply = {err = tostring(reply)}
    end
    replies[#replies + 1] = reply
    k = k + zones
    a = a + 2 + zones * 5
end

return replies
)lua";

struct ScriptDigest {
    char hex[kSha1HexLength];

    ScriptDigest() { sha1_hex(window_script(), hex); }
};

bool read_count(const redisReply *element, std::uint64_t *out)
{
    if (element == nullptr || element->type != REDIS_REPLY_INTEGER
        || element->integer < 0)
    {
        return false;
    }

    *out = static_cast<std::uint64_t>(element->integer);
    return true;
}

}  // namespace

std::string_view window_script()
{
    return {kScript, sizeof(kScript) - 1};
}

std::string_view window_script_sha1()
{
    static const ScriptDigest digest;
    return {digest.hex, kSha1HexLength};
}

BatchReply decode_batch_reply(const redisReply *reply, std::size_t requests)
{
    if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
        std::string_view error(reply->str, reply->len);
        return {error.substr(0, 8) == "NOSCRIPT" ? BatchReply::Kind::kNoScript
                                                 : BatchReply::Kind::kError,
                error};
    }

    if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY
        || reply->elements != requests)
    {
        return {BatchReply::Kind::kMalformed, {}};
    }

    return {BatchReply::Kind::kReplies, {}};
}

ScriptReply decode_script_reply(const redisReply *reply, std::size_t zones,
                                ZoneCount *counts)
{
    ScriptReply out{ScriptReply::Kind::kMalformed, 0, false, {}};

    if (reply == nullptr) {
        return out;
    }

    if (reply->type == REDIS_REPLY_ERROR) {
        out.error = std::string_view(reply->str, reply->len);
        out.kind = ScriptReply::Kind::kError;
        return out;
    }

    if (reply->type != REDIS_REPLY_ARRAY
        || reply->elements != 2 + kRepliesPerZone * zones)
    {
        return out;
    }

    std::uint64_t rejected;

    if (!read_count(reply->element[0], &out.now_ms)
        || !read_count(reply->element[1], &rejected) || rejected > 1)
    {
        return out;
    }

    for (std::size_t i = 0; i < zones; i++) {
        redisReply **zone = reply->element + 2 + kRepliesPerZone * i;
        std::uint64_t over;

        if (!read_count(zone[0], &counts[i].total)
            || !read_count(zone[1], &counts[i].oldest)
            || !read_count(zone[2], &over) || over > 1)
        {
            return out;
        }

        counts[i].over = over == 1;
    }

    out.rejected = rejected == 1;
    out.kind = ScriptReply::Kind::kVerdict;
    return out;
}

}  // namespace ratelimit
