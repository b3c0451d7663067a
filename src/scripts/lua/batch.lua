-- The window script, part 7 of 7: the batch entry.
--
-- A request that does not fit in an enforced zone is counted in no zone.
-- A request that passes is counted, c units, in every zone it fits in; a
-- dry-run zone it does not fit in does not count it, as if it had been
-- rejected there.

-- What read_zone() returned for each zone of a request of several, 8
-- values a zone (its number first), while its other zones are read: a
-- zone is written only once all are known not to reject the request.  Kept
-- flat and shared by all requests, so that no request makes a table.
local st = {}

-- One request, its keys KEYS[k] on, its reply into `reply` from index r;
-- returns its shape().  A request of one zone (a peek, a slide, a clock
-- stepped back, a key started afresh, a request run() raised on) has
-- nothing to hold while others are read (about 5% of Redis's
-- instructions, callgrind).
function decide(k, entry, reply, r, read)
  local kind = byte(entry, 1)
  if kind == @kEntryInterval.byte@ then
    return peek_interval(k, entry, reply, r)
  elseif kind == @kEntrySettle.byte@ then
    return settle(k, entry, reply, r)
  elseif kind == @kEntryLease.byte@ then
    return lease(k, entry, reply, r)
  end

  local zones, cost = entry, false
  if kind == @kEntryCosts.byte@ then
    zones, cost = costs(entry)
  end
  local n = #zones - 1
  local counting = kind ~= @kEntryPeek.byte@

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
    return 1, 1 + @kRepliesPerZone@
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
    local q = r + @kRepliesPerZone@ * (i - 1) + 1
    reply[q], reply[q + 1] =
        write_zone(keys[k + i - 1], d, counting and not rejected
                   and not out and c or 0, count, st[s + 3], st[s + 4],
                   st[s + 5], st[s + 6], st[s + 7], st[s + 8])
    reply[q + 2] = out and 1 or 0
  end
  return n, 1 + @kRepliesPerZone@ * n
end

-- The reply, one flat array (see window_script.hpp).
local replies = {now}
local entries = #ARGV

-- The zone of an entry that counts 1 unit in one zone, by the entry's
-- text: run() takes those itself.
local solo = {}
for d = 1, zones do
  solo['@kEntryCount@' .. string.char(d - 1)] = d
end

-- The next entry's argument, its first key and its reply's first element.
local a, k, r = 2 + zones * @kArgsPerZone@, 1, 2

-- decide() under pcall: an error (a key of another type, OOM) takes the
-- place of that request's `rejected`, its counts are zeros, and the other
-- requests are still decided.
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


-- run()'s counted request of one GCRA zone: its TAT read (GET) and, if it
-- fits, moved (SET).  A key of another type raises before anything is
-- written.
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
  a, k, r = a + 1, k + 1, r + (1 + @kRepliesPerZone@)
end

-- run()'s counted request of one window zone, taken here where new keys
-- are strings when its key is a packed string whose newest bucket (or
-- fixed window) is the current one with none to cut, or no key: counted
-- in place (SETRANGE) or made (SET).  That is most requests; taken here, a
-- request costs Redis a sixth (sliding) to a quarter (fixed) fewer
-- instructions than through careful() (callgrind, on hashes), mostly
-- function calls and pcalls saved.  Everything else, a hash's request
-- among them, goes to careful(), with what GET answered.
local function run_window(d)
  local key = keys[k]
  local s = d and redis.pcall('GET', key)
  local p = type(s) == 'string' and unpacked(s, fixed[d])
  local ids = p and p.ids
  if p then
    p.s = packed[d] and ids[#ids] == bucket[d]
          and ids[1] > bucket[d] - span[d]
  elseif s == false and packed[d] then
    p = fresh()
  end
  if not p or s and not p.s then
    return careful(s)
  end
  local count, oldest = p.t, p.s and ids[1] or bucket[d]
  local out = 1 > limit[d] - count
  if not out then
    put_bucket(key, d, p, bucket[d],
               (fixed[d] and count or p.s and p.counts[#ids] or 0) + 1)
  end
  replies[r], replies[r + 1], replies[r + 2], replies[r + 3] =
      out and enforce[d] and 1 or 0, out and count or count + 1, oldest,
      out and 1 or 0
  a, k, r = a + 1, k + 1, r + (1 + @kRepliesPerZone@)
end

-- The requests one after another, as if each were its own call, but at
-- one Redis time, into one flat reply.  Anything in run() that raises (a
-- field that is not a number, a key of another type, OOM) does so before
-- it writes, or in the one write that failed: run() is left, and careful()
-- takes that request again from the start.
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
