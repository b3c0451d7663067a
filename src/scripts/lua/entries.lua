-- The window script, part 7 of 11: what an entry names, and the interval
-- peek.

-- An entry's zones and reply length (a lease's: its zone bytes, even where
-- it names several and fails).
local function shape(entry)
  local kind = byte(entry, 1)
  if kind == @kEntrySettle.byte@ then
    return 1, 1 + @kRepliesPerZone@
  elseif kind == @kEntryInterval.byte@ or kind == @kEntryCosts.byte@
         or kind == @kEntryLease.byte@ then
    local n = #entry - (string.find(entry, '@kNumbersEnd@', 1, true)
                        or #entry)
    return n, @kRepliesPerZone@ * n + 1
              + (kind == @kEntryInterval.byte@
                 and @kIntervalRepliesPerZone@ * n
                 or kind == @kEntryLease.byte@ and @kLeaseGrantReplies@
                 or 0)
  end
  return #entry - 1, 1 + @kRepliesPerZone@ * (#entry - 1)
end

-- An entry of costs: its zone bytes (after the numbers' end) and costs.
local function costs(entry)
  local list, at = string.match(
      entry, '^@kEntryCosts@([%d@kNumberNext@]+)@kNumbersEnd@()')
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

-- The sum of the `wanted` newest buckets of sliding zone `d` in `key` (a
-- window decide() just read), the current one included.
local function count_newest(key, d, wanted)
  local p, count, newest, all = redis.pcall('GET', key), 0
  if type(p) == 'string' then
    p, all = unpacked(p, fixed[d]), {}
    newest = p.ids[#p.ids]
    for i = 1, #p.ids do
      all[2 * i - 1], all[2 * i] = p.ids[i], p.counts[i]
    end
  else
    newest = tonumber(call('HGET', key, 'n'))
    all = call('HGETALL', key)
  end
  local before = ahead(bucket[d], newest, span[d]) - wanted
  for j = 1, #all, 2 do
    local id = tonumber(all[j])
    if id and id > before then
      count = count + (tonumber(all[j + 1]) or 0)
    end
  end
  return count
end

-- One request (batch.lua), which an interval peek runs as a peek first.
local decide

-- An interval peek, answered as a peek and then per zone the sum of its K
-- newest buckets (a fixed window: its count).
local function peek_interval(k, entry, reply, r)
  local wanted, at = string.match(
      entry, '^@kEntryInterval@([%d@kNumberNext@]+)@kNumbersEnd@()')
  local zones = string.sub(entry, at)
  local n, ks = #zones, string.gmatch(wanted, '%d+')
  decide(k, '@kEntryPeek@' .. zones, reply, r)
  for i = 1, n do
    local d, want = byte(zones, i) + 1, tonumber(ks())
    if not want or want < 1 or want > W then
      error('bad interval peek')
    end
    reply[r + @kRepliesPerZone@ * n + i] =
        gcra[d] and 0
        or fixed[d] and reply[r + @kRepliesPerZone@ * (i - 1) + 1]
        or count_newest(keys[k + i - 1], d, want)
  end
  return n, 1 + (@kRepliesPerZone@ + @kIntervalRepliesPerZone@) * n
end
