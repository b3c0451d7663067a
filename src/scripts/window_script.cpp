#include "scripts/window_script.hpp"

#include <string>

namespace ratelimit {

namespace {

// Each key is a hash.  Sliding window: "t" the count of the live buckets,
// "o" the oldest non-empty bucket, "n" the newest one, and one field per
// non-empty bucket, named by its absolute number, holding its count (a
// settle that gave units back may leave one holding 0).  Buckets older than
// the window are deleted as the window slides past them, each exactly once,
// so the work per call does not grow with the number of buckets in a
// window; "t" saves summing them.  Fixed window: "t" the count and "n" the
// window's number.  Either way the key expires when its newest count leaves
// the window, so idle subjects cost nothing, and a key written under
// another algorithm or bucket length is recognised and started afresh.  A
// GCRA zone's key is a string, the subject's theoretical arrival time in
// microseconds of Redis time, set with its expiry (SET PXAT: Redis 6.2) a
// window (the time `limit` requests take) after that time, when its
// backlog is gone: a subject seen again within a window finds its key, as a
// window zone's does, rather than making it anew; a key of another type is
// started afresh.
//
// A request of cost c (1 for "c", each zone's own for "w") does not fit in
// a zone when count + max(c, 1) > limit: a cost of 0 checks, counting
// nothing.  A request that does not fit in an enforced zone is counted in
// no zone.  A request that passes is counted, c units, in every zone it
// fits in; a dry-run zone it does not fit in does not count it, as if it
// had been rejected there.
//
// Numbers go to redis.call as text made by string.format('%d'): Redis 7.0
// turns a Lua number argument into text with "%.17g", which cost about a
// tenth of the script's instructions (callgrind).
//
// A zone's limit, bucket length and span are what nginx sends
// (window_rules.hpp, zone_numbers_valid()), or the whole call is refused:
// an infinite or too large expiry time made Redis delete a key as soon as
// written or keep it for ever, and a limit of NaN let every request pass.
//
// The functions, in the script's order:
// - drop(): HDELs bucket fields, 256 at a time.
// - slide(): finds the buckets of `key` older than `first`; returns the
//   count without them, the oldest bucket left and the names of those to
//   delete, which write_zone() deletes once every zone of the request is
//   read, so that a request failing before that (a later zone's key of
//   another type) leaves the key as it was.  `oldest` and `newest` are
//   non-empty, newest >= first.  It steps through bucket numbers from
//   `oldest`, 2, 14, 16 and 32 at a time: a subject seen in every bucket
//   loses one bucket a bucket, and the first step finds it and the next;
//   past 64 numbers the live buckets are sparse, and reading the whole hash
//   once is cheaper (and mends a count that disagrees with its buckets, a
//   hand-edited key).  So a call costs at most 5 reads, never the number of
//   buckets in a window.
// - ahead(): the bucket to count in: `newest` when Redis's clock has
//   stepped back by at most a window since it was written (a failover to a
//   replica, an NTP step), so that counts made "in the future" still count;
//   else current.  A larger gap means the key was written under another
//   bucket length: the zone starts afresh in read_zone().
// - The zones of the batch are read once: a zone's current bucket number
//   is also kept as text, the field name, and so is the time its keys
//   expire at if counted now; `first_bucket` is the oldest bucket in the
//   window.
// - read_zone(): reads zone `d` of a request, its key `key`: returns the
//   count in the window, the oldest and newest buckets (0 if none), the
//   count of the current bucket, the buckets to delete as the window slid
//   (false if it did not), the current bucket and its field name.  Writes
//   nothing but a DEL of a key it starts afresh.  `read`, if given, is what
//   run() read of the zone.
// - write_zone(): writes back a zone read by read_zone(): deletes the
//   buckets the window slid past, then counts `add` units in it.  Deleting
//   first matters under maxmemory: Redis refuses a script's writes with OOM
//   only until it has written something, and HDEL is never refused.
//   Returns the zone's count and oldest bucket after that.
// - st: what read_zone() returned for each zone of a request of several, 8
//   values a zone (its number first), while its other zones are read: a
//   zone is written only once all are known not to reject the request.
//   Kept flat and shared by all requests, so that no request makes a table.
// - shape(): an entry's zones and reply length (an "l" entry's: its zone
//   bytes, even where it names several and fails).
// - costs(): a "w" entry's zone bytes (after a ':') and costs.
// - count_newest(): the sum of the `wanted` newest buckets of sliding zone
//   `d` in `key` (a window decide() just read), the current one included.
// - peek_interval(): an interval peek, answered as "p" and then per zone
//   the sum of its K newest buckets (a fixed window: its count).
// - settle(): an "s" entry: adds its delta to its bucket if that bucket is
//   still in the window, never below 0, and answers the count and oldest
//   bucket after it and the units it applied (see window_script.hpp).  In
//   a GCRA zone it moves the TAT by delta turns, never before now (the
//   bucket is not read; a TAT moved back to now is deleted): a request
//   another part of its call rejected gives its turns back.
// - lease(): an "l" entry (see window_script.hpp): reads its zone as a
//   request does (the window slides, a clock stepped back counts in the
//   newest bucket), grants g = min(asked, max(limit - count, 0)) units and
//   counts them as "w" counts a cost of g (g = 0 writes what a peek
//   would).  Its errors are raised before anything is read: a lease of
//   several zones, a malformed one, one of a GCRA or dry-run zone.
// - decide(): one request, its keys KEYS[k] on, its reply into `reply` from
//   index r; returns its shape().  A request of one zone (a peek, a slide,
//   a clock stepped back, a key started afresh, a request run() raised on)
//   has nothing to hold while others are read (about 5% of Redis's
//   instructions, callgrind).
// - careful(): decide() under pcall: an error (a key of another type, OOM)
//   takes the place of that request's `rejected`, its counts are zeros, and
//   the other requests are still decided.
// - run(): the requests one after another, as if each were its own call,
//   but at one Redis time, into one flat reply.  run_gcra() takes a counted
//   request of one GCRA zone: its TAT read (GET) and, if it fits, moved
//   (SET).  run_window() takes a counted request of one window zone ("c")
//   itself when its key needs nothing deleted: counted in the bucket (or
//   fixed window) it was last counted in, or in a new bucket, or a new key.
//   That is most requests; taken there, a request costs Redis a sixth
//   (sliding) to a quarter (fixed) fewer instructions (callgrind), mostly
//   function calls and pcalls saved, and "+ 0" converts a field once where
//   tonumber() does it twice.  Everything else goes to careful(), with what
//   was read.  Anything in run() that raises (a field that is not a number,
//   a key of another type, OOM) does so before it writes, or in the one
//   write that failed: run() is left, and careful() takes that request
//   again from the start.
//
// The text stays within kMaxScriptSize (see window_script.hpp): it is
// indented 2 spaces a level, and its comments are here, not in the Lua.
//
// The Redis module's command (redis_module/batch_decider.cpp) is this
// script in C++, function for function and Redis command for Redis command:
// a change here is made there too, and t/19 holds both to one model.
constexpr char kScript[] = R"lua(
local call, fmt, tonumber = redis.call, string.format, tonumber
local time = call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local now_us = time[1] * 1000000 + time[2]

local function drop(key, ids)
  for i = 1, #ids, 256 do
    call('HDEL', key, unpack(ids, i, math.min(i + 255, #ids)))
  end
end

local steps = {2, 14, 16, 32}

local function slide(key, count, oldest, newest, first)
  local gone = {}
  local at = oldest
  for i = 1, 4 do
    if at > newest then
      break
    end
    local last = math.min(at + steps[i] - 1, newest)
    local names = {}
    for id = at, last do
      names[#names + 1] = fmt('%d', id)
    end
    local counts = call('HMGET', key, unpack(names))
    for j = 1, #names do
      if counts[j] then
        local id = at + j - 1
        if id >= first then
          return count, id, gone
        end
        count = count - tonumber(counts[j])
        gone[#gone + 1] = names[j]
      end
    end
    at = last + 1
  end

  gone, count = {}, 0
  local all = call('HGETALL', key)
  local next = newest
  for j = 1, #all, 2 do
    local id = tonumber(all[j])
    if id and id < first then
      gone[#gone + 1] = all[j]
    elseif id then
      count = count + (tonumber(all[j + 1]) or 0)
      if id < next then
        next = id
      end
    end
  end
  return count, next, gone
end

local function ahead(current, newest, span)
  if newest and newest > current and newest - current <= span then
    return newest
  end
  return current
end

local zones = tonumber(ARGV[1])
local limit, width, span, fixed, enforce, gcra = {}, {}, {}, {}, {}, {}
local bucket, bucket_field, first_bucket, expire_at = {}, {}, {}, {}
local W = 604800000000000

local function whole(x, most)
  return x and x >= 1 and x <= most and x % 1 == 0
end

for d = 1, zones do
  local z = 2 + (d - 1) * 5
  limit[d] = tonumber(ARGV[z])
  width[d] = tonumber(ARGV[z + 1])
  span[d] = tonumber(ARGV[z + 2])
  if not (whole(limit[d], 2^53) and whole(width[d], W)
          and whole(span[d], W) and width[d] * span[d] <= W) then
    return {err = "ERR ratelimit: a zone's limit, bucket and span must "
                  .. 'be whole numbers from 1, the limit at most 2^53, '
                  .. 'bucket * span at most 604800000000000 ms'}
  end
  fixed[d] = ARGV[z + 3] == 'f'
  gcra[d] = ARGV[z + 3] == 'g' and width[d] * 1000 / limit[d]
  enforce[d] = ARGV[z + 4] == '1'
  bucket[d] = math.floor(now / width[d])
  bucket_field[d] = fmt('%d', bucket[d])
  first_bucket[d] = bucket[d] - span[d] + 1
  expire_at[d] = fmt('%d', (bucket[d] + span[d]) * width[d])
end

local byte = string.byte
local keys = KEYS

local function read_zone(key, d, read)
  if gcra[d] then
    local tat = redis.pcall('GET', key)
    if type(tat) == 'table' then
      call('DEL', key)
    end
    tat = tonumber(tat) or 0
    return math.max(tat - now_us, 0), 0, 0, 0, false, 0, ''
  end
  local current, field = bucket[d], bucket_field[d]
  local count, oldest, newest, here, gone = 0, 0, 0, 0, false

  if fixed[d] then
    local h = read or call('HMGET', key, 't', 'n')
    current = ahead(current, tonumber(h[2]), span[d])
    if current ~= bucket[d] then
      field = fmt('%d', current)
    end
    if tonumber(h[2]) == current and tonumber(h[1]) then
      count, oldest, newest = tonumber(h[1]), current, current
    elseif h[1] or h[2] then
      call('DEL', key)
    end
  else
    local h = read or call('HMGET', key, 't', 'o', 'n', field)
    local c, o, m = tonumber(h[1]), tonumber(h[2]), tonumber(h[3])
    if m and m > current and ahead(current, m, span[d]) == m then
      current, field = m, fmt('%d', m)
      h[4] = call('HGET', key, field)
    end
    local first = current - span[d] + 1
    if c and o and m and m >= first and m <= current then
      count, oldest, newest = c, o, m
      here = tonumber(h[4]) or 0
      if oldest < first then
        count, oldest, gone = slide(key, count, oldest, newest, first)
      end
    elseif h[1] or h[2] or h[3] then
      call('DEL', key)
    end
  end

  return count, oldest, newest, here, gone, current, field
end

local function set_tat(key, d, ahead)
  local tat = now_us + ahead
  call('SET', key, fmt('%d', math.floor(tat + 0.5)),
       'PXAT', fmt('%d', math.ceil(tat / 1000) + width[d]))
end

local function write_zone(key, d, add, count, oldest, newest, here, gone,
                          current, field)
  if gcra[d] then
    count = count + add * gcra[d]
    if add > 0 then
      set_tat(key, d, count)
    end
    return math.floor(count + 0.5), 0
  end
  if gone then
    drop(key, gone)
  end

  if add > 0 then
    local total = fmt('%d', count + add)
    if newest == current and fixed[d] then
      call('HSET', key, 't', total)
    elseif newest == current and gone then
      call('HSET', key, field, fmt('%d', here + add), 't', total,
           'o', fmt('%d', oldest))
    elseif newest == current then
      call('HSET', key, field, fmt('%d', here + add), 't', total)
    else
      if oldest == 0 then
        oldest = current
      end
      if fixed[d] then
        call('HSET', key, 't', total, 'n', field)
      else
        call('HSET', key, field, fmt('%d', add), 't', total,
             'o', fmt('%d', oldest), 'n', field)
      end
      call('PEXPIREAT', key, fmt('%d', (current + span[d]) * width[d]))
    end
    count = count + add
  elseif gone then
    call('HSET', key, 't', fmt('%d', count), 'o', fmt('%d', oldest))
  end
  return count, oldest
end

local st = {}

local function over(d, count, c)
  local need = math.max(c, 1)
  if gcra[d] then
    return count + need * gcra[d] > span[d] * gcra[d] + 1
  end
  return count + need > limit[d]
end

local function shape(entry)
  local kind = byte(entry, 1)
  if kind == 115 then
    return 1, 4
  elseif kind == 105 or kind == 119 or kind == 108 then
    local n = #entry - (string.find(entry, ':', 1, true) or #entry)
    return n, 3 * n + 1 + (kind == 105 and n or kind == 108 and 1 or 0)
  end
  return #entry - 1, 3 * #entry - 2
end

local function costs(entry)
  local list, at = string.match(entry, '^w([%d,]+):()')
  local cost = {}
  for c in string.gmatch(list, '%d+') do
    cost[#cost + 1] = tonumber(c)
    if cost[#cost] > 2^53 then
      error('bad cost')
    end
  end
  local zones = string.sub(entry, at - 1)
  if #cost ~= #zones - 1 then
    error('bad cost')
  end
  return zones, cost
end

local function count_newest(key, d, wanted)
  local newest = tonumber(call('HGET', key, 'n'))
  local before = ahead(bucket[d], newest, span[d]) - wanted
  local all, count = call('HGETALL', key), 0
  for j = 1, #all, 2 do
    local id = tonumber(all[j])
    if id and id > before then
      count = count + (tonumber(all[j + 1]) or 0)
    end
  end
  return count
end

local decide

local function peek_interval(k, entry, reply, r)
  local wanted, at = string.match(entry, '^i([%d,]+):()')
  local zones = string.sub(entry, at)
  local n, ks = #zones, string.gmatch(wanted, '%d+')
  decide(k, 'p' .. zones, reply, r)
  for i = 1, n do
    local d, want = byte(zones, i) + 1, tonumber(ks())
    if not want or want < 1 or want > W then
      error('bad interval peek')
    end
    reply[r + 3 * n + i] = gcra[d] and 0
                           or fixed[d] and reply[r + 3 * i - 2]
                           or count_newest(keys[k + i - 1], d, want)
  end
  return n, 1 + 4 * n
end

local function settle(k, entry, reply, r)
  local delta, at, z = string.match(entry, '^s(%-?%d+),(%d+):(.)$')
  delta, at = tonumber(delta), tonumber(at)
  if not (delta and at and math.abs(delta) <= 2^53 and at <= 2^53) then
    error('bad settle')
  end
  local key, d = keys[k], byte(z) + 1
  reply[r], reply[r + 3] = 0, 0
  if gcra[d] then
    local ahead = read_zone(key, d)
    local after = math.max(0, ahead + delta * gcra[d])
    if after == 0 and ahead > 0 then
      call('DEL', key)
    elseif after ~= ahead then
      set_tat(key, d, after)
    end
    reply[r + 1], reply[r + 2] = math.floor(after + 0.5), 0
    reply[r + 3] = math.floor((after - ahead) / gcra[d] + 0.5)
    return 1, 4
  end
  local count, oldest, newest, here, gone, current, field =
      read_zone(key, d)
  local inside = at <= current and at > current - span[d]
  local was = 0
  if inside and fixed[d] then
    was = count
  elseif inside then
    was = at == current and here
          or tonumber(call('HGET', key, fmt('%d', at))) or 0
  end
  local now_at = math.max(0, was + delta)
  if not inside or now_at == was then
    reply[r + 1], reply[r + 2] =
        write_zone(key, d, 0, count, oldest, newest, here, gone,
                   current, field)
    return 1, 4
  end
  if gone then
    drop(key, gone)
  end
  local name = fmt('%d', at)
  count = count + now_at - was
  if oldest == 0 or at < oldest then
    oldest = at
  end
  local set = fixed[d] and {'t', fmt('%d', count)}
              or {name, fmt('%d', now_at), 't', fmt('%d', count),
                  'o', fmt('%d', oldest)}
  local renew = newest == 0 or newest < at
  if renew then
    set[#set + 1], set[#set + 2] = 'n', name
  end
  call('HSET', key, unpack(set))
  if renew then
    call('PEXPIREAT', key, fmt('%d', (at + span[d]) * width[d]))
  end
  reply[r + 1], reply[r + 2], reply[r + 3] = count, oldest, now_at - was
  return 1, 4
end

local function lease(k, entry, reply, r)
  local list, z = string.match(entry, '^l([%d,]+):(.*)$')
  if z and (#z > 1 or string.find(list, ',', 1, true)) then
    error({err = 'ERR ratelimit: a lease is of one zone'})
  end
  local asked, d = z and tonumber(list), z and byte(z)
  d = d and d + 1
  if not (asked and asked <= 2^53 and limit[d]) then
    error({err = 'ERR ratelimit: malformed lease'})
  elseif gcra[d] then
    error({err = 'ERR ratelimit: lease of a GCRA zone'})
  elseif not enforce[d] then
    error({err = 'ERR ratelimit: lease of a dry-run zone'})
  end
  local key = keys[k]
  local count, oldest, newest, here, gone, current, field =
      read_zone(key, d)
  local g = math.min(asked, math.max(limit[d] - count, 0))
  reply[r] = g == 0 and asked > 0 and 1 or 0
  reply[r + 1], reply[r + 2] =
      write_zone(key, d, g, count, oldest, newest, here, gone, current,
                 field)
  reply[r + 3], reply[r + 4] = over(d, count, asked) and 1 or 0, g
  return 1, 5
end

function decide(k, entry, reply, r, read)
  local kind = byte(entry, 1)
  if kind == 105 then
    return peek_interval(k, entry, reply, r)
  elseif kind == 115 then
    return settle(k, entry, reply, r)
  elseif kind == 108 then
    return lease(k, entry, reply, r)
  end

  local zones, cost = entry, false
  if kind == 119 then
    zones, cost = costs(entry)
  end
  local n = #zones - 1
  local counting = kind ~= 112

  if n == 1 then
    local key, d, c = keys[k], byte(zones, 2) + 1, cost and cost[1] or 1
    local count, oldest, newest, here, gone, current, field =
        read_zone(key, d, read)
    local out = over(d, count, c)
    reply[r] = out and enforce[d] and 1 or 0
    reply[r + 1], reply[r + 2] =
        write_zone(key, d, counting and not out and c or 0, count,
                   oldest, newest, here, gone, current, field)
    reply[r + 3] = out and 1 or 0
    return 1, 4
  end

  local rejected = false

  for i = 1, n do
    local d = byte(zones, i + 1) + 1
    local s = (i - 1) * 8
    local count
    st[s + 1] = d
    count, st[s + 3], st[s + 4], st[s + 5], st[s + 6], st[s + 7],
        st[s + 8] = read_zone(keys[k + i - 1], d)
    st[s + 2] = count
    if over(d, count, cost and cost[i] or 1) and enforce[d] then
      rejected = true
    end
  end

  reply[r] = rejected and 1 or 0

  for i = 1, n do
    local s = (i - 1) * 8
    local d, count, c = st[s + 1], st[s + 2], cost and cost[i] or 1
    local out = over(d, count, c)
    local q = r + 3 * i - 2
    reply[q], reply[q + 1] =
        write_zone(keys[k + i - 1], d, counting and not rejected
                   and not out and c or 0, count, st[s + 3], st[s + 4],
                   st[s + 5], st[s + 6], st[s + 7], st[s + 8])
    reply[q + 2] = out and 1 or 0
  end
  return n, 1 + 3 * n
end

local replies = {now}
local entries = #ARGV

local solo = {}
for d = 1, zones do
  solo['c' .. string.char(d - 1)] = d
end

local a, k, r = 2 + zones * 5, 1, 2

local function careful(read)
  local entry = ARGV[a]
  local ok, n, width = pcall(decide, k, entry, replies, r, read)
  if not ok then
    replies[r] = type(n) == 'table' and n or {err = tostring(n)}
    n, width = shape(entry)
    for j = r + 1, r + width - 1 do
      replies[j] = 0
    end
  end
  a, k, r = a + 1, k + n, r + width
end

local function run_gcra(d)
  local key, t = keys[k], gcra[d]
  local ahead = math.max((tonumber(call('GET', key)) or 0) - now_us, 0)
  if ahead + t > span[d] * t + 1 then
    replies[r] = enforce[d] and 1 or 0
    replies[r + 1], replies[r + 2], replies[r + 3] =
        math.floor(ahead + 0.5), 0, 1
  else
    set_tat(key, d, ahead + t)
    replies[r] = 0
    replies[r + 1], replies[r + 2], replies[r + 3] =
        math.floor(ahead + t + 0.5), 0, 0
  end
  a, k, r = a + 1, k + 1, r + 4
end

local function run_window(d)
  local take = d ~= nil
  local key, field, h, count, oldest, same, fixed_window
  if take then
    key, field, fixed_window = keys[k], bucket_field[d], fixed[d]
    if fixed_window then
      h = call('HMGET', key, 't', 'n')
      same = h[2] == field
      if same then
        count, oldest = h[1] + 0, bucket[d]
      else
        count, oldest = 0, 0
        take = not (h[1] or h[2])
      end
    else
      h = call('HMGET', key, 't', 'o', 'n', field)
      local newest = h[3]
      if newest then
        count, oldest = h[1] + 0, h[2] + 0
        same = newest == field
        if not same then
          newest = newest + 0
          same = newest == bucket[d]
          take = newest <= bucket[d] and newest >= first_bucket[d]
        end
        take = take and oldest >= first_bucket[d]
      else
        count, oldest, same = 0, 0, false
        take = not (h[1] or h[2])
      end
    end
  end

  if not take then
    careful(h)
  elseif count + 1 > limit[d] then
    replies[r] = enforce[d] and 1 or 0
    replies[r + 1], replies[r + 2], replies[r + 3] = count, oldest, 1
    a, k, r = a + 1, k + 1, r + 4
  else
    local total = fmt('%d', count + 1)
    if same and fixed_window then
      call('HSET', key, 't', total)
    elseif same then
      call('HSET', key, field, fmt('%d', h[4] + 1), 't', total)
    else
      if oldest == 0 then
        oldest = bucket[d]
      end
      if fixed_window then
        call('HSET', key, 't', total, 'n', field)
      else
        call('HSET', key, field, '1', 't', total,
             'o', fmt('%d', oldest), 'n', field)
      end
    end
    replies[r] = 0
    replies[r + 1], replies[r + 2], replies[r + 3] =
        count + 1, oldest, 0
    if not same then
      local w = redis.pcall('PEXPIREAT', key, expire_at[d])
      if type(w) == 'table' then
        replies[r] = w
        replies[r + 1], replies[r + 2], replies[r + 3] = 0, 0, 0
      end
    end
    a, k, r = a + 1, k + 1, r + 4
  end
end

local function run()
  while a <= entries do
    local d = solo[ARGV[a]]
    if d and gcra[d] then
      run_gcra(d)
    else
      run_window(d)
    end
  end
end

while not pcall(run) do
  careful(nil)
end

return replies
)lua";


// The window script for a Redis Cluster node that takes the keys of
// several slots in one call: declared as touching undeclared keys of
// several slots, and taking the keys from the front of ARGV (the count,
// then the keys) so that it declares none.
constexpr char kCrossSlotHead[] = R"lua(#!lua flags=allow-cross-slot-keys
local n = tonumber(ARGV[1])
local KEYS, ARGV = {unpack(ARGV, 2, n + 1)}, {unpack(ARGV, n + 2)}
)lua";

struct ScriptDigest {
    char hex[kSha1HexLength];

    explicit ScriptDigest(std::string_view script) { sha1_hex(script, hex); }
};

struct CrossSlotScript {
    std::string text;

    CrossSlotScript()
        : text(std::string(kCrossSlotHead) + std::string(window_script()))
    {
    }
};

bool read_count(const Reply &element, std::uint64_t *out)
{
    if (element.type != Reply::Type::kInteger || element.integer < 0) {
        return false;
    }

    *out = static_cast<std::uint64_t>(element.integer);
    return true;
}

}  // namespace

std::string_view window_script()
{
    return {kScript, sizeof(kScript) - 1};
}

std::string_view window_script_sha1()
{
    static const ScriptDigest digest(window_script());
    return {digest.hex, kSha1HexLength};
}

std::string_view cross_slot_script()
{
    static const CrossSlotScript script;
    return script.text;
}

std::string_view cross_slot_script_sha1()
{
    static const ScriptDigest digest(cross_slot_script());
    return {digest.hex, kSha1HexLength};
}

BatchReply decode_batch_reply(const Reply *reply, std::size_t elements)
{
    BatchReply out{BatchReply::Kind::kMalformed, 0, {}};

    if (reply != nullptr && reply->type == Reply::Type::kError) {
        out.error = reply->text;
        out.kind = out.error.substr(0, 8) == "NOSCRIPT"
                       ? BatchReply::Kind::kNoScript
                       : BatchReply::Kind::kError;
        return out;
    }

    if (reply != nullptr && reply->type == Reply::Type::kArray
        && reply->elements == elements && elements > 0
        && read_count(reply->element[0], &out.now_ms))
    {
        out.kind = BatchReply::Kind::kReplies;
    }

    return out;
}

ScriptReply decode_settle_reply(const Reply *reply, std::int64_t *applied)
{
    ScriptReply out{ScriptReply::Kind::kMalformed, false, {}};
    const Reply &units = reply[3];

    if (reply[0].type == Reply::Type::kError) {
        out.error = reply[0].text;
        out.kind = ScriptReply::Kind::kError;
        return out;
    }

    std::uint64_t rejected, count, oldest;

    if (read_count(reply[0], &rejected) && rejected == 0
        && read_count(reply[1], &count) && read_count(reply[2], &oldest)
        && units.type == Reply::Type::kInteger)
    {
        *applied = units.integer;
        out.kind = ScriptReply::Kind::kVerdict;
    }

    return out;
}

ScriptReply decode_script_reply(const Reply *reply, std::size_t zones,
                                ZoneCount *counts, bool interval)
{
    ScriptReply out{ScriptReply::Kind::kMalformed, false, {}};

    if (reply[0].type == Reply::Type::kError) {
        out.error = reply[0].text;
        out.kind = ScriptReply::Kind::kError;
        return out;
    }

    std::uint64_t rejected;

    if (!read_count(reply[0], &rejected) || rejected > 1) {
        return out;
    }

    for (std::size_t i = 0; i < zones; i++) {
        const Reply *zone = reply + 1 + kRepliesPerZone * i;
        std::uint64_t over;

        if (!read_count(zone[0], &counts[i].total)
            || !read_count(zone[1], &counts[i].oldest)
            || !read_count(zone[2], &over) || over > 1)
        {
            return out;
        }

        counts[i].over = over == 1;
        counts[i].in_interval = 0;

        if (interval
            && !read_count(reply[1 + kRepliesPerZone * zones + i],
                           &counts[i].in_interval))
        {
            return out;
        }
    }

    out.rejected = rejected == 1;
    out.kind = ScriptReply::Kind::kVerdict;
    return out;
}

ScriptReply decode_lease_reply(const Reply *reply, ZoneCount *count,
                               std::uint64_t *granted)
{
    ScriptReply out = decode_script_reply(reply, 1, count);

    if (out.kind == ScriptReply::Kind::kVerdict
        && (!read_count(reply[1 + kRepliesPerZone], granted)
            || (out.rejected && *granted > 0)))
    {
        out.kind = ScriptReply::Kind::kMalformed;
    }

    return out;
}

}  // namespace ratelimit
