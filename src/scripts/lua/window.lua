-- The window script, part 3 of 7: a zone's key read and written.
--
-- A window zone's key is a hash.  Sliding window: "t" the count of the
-- live buckets, "o" the oldest non-empty bucket, "n" the newest one, and
-- one field per non-empty bucket, named by its absolute number, holding
-- its count (a settle that gave units back may leave one holding 0).
-- Buckets older than the window are deleted as the window slides past
-- them, each exactly once, so the work per call does not grow with the
-- number of buckets in a window; "t" saves summing them.  Fixed window:
-- "t" the count and "n" the window's number.  Either way the key expires
-- when its newest count leaves the window, so idle subjects cost nothing,
-- and a key written under another algorithm or bucket length is
-- recognised and started afresh.  A GCRA zone's key: see gcra.lua.
--
-- A request of cost c (1 for a counted entry, each zone's own for one of
-- costs) does not fit in a zone when max(c, 1) > limit - count: a cost of
-- 0 checks, counting nothing.  Written so, not count + c > limit, it is
-- exact to 2^53: a double rounds 2^53 + 1 to 2^53.

-- HDELs bucket fields, 256 at a time.
local function drop(key, ids)
  for i = 1, #ids, 256 do
    call('HDEL', key, unpack(ids, i, math.min(i + 255, #ids)))
  end
end

local steps = {2, 14, 16, 32}

-- Finds the buckets of `key` older than `first`; returns the count without
-- them, the oldest bucket left and the names of those to delete, which
-- write_zone() deletes once every zone of the request is read, so that a
-- request failing before that (a later zone's key of another type) leaves
-- the key as it was.  `oldest` and `newest` are non-empty, newest >=
-- first.  It steps through bucket numbers from `oldest`, 2, 14, 16 and 32
-- at a time: a subject seen in every bucket loses one bucket a bucket, and
-- the first step finds it and the next; past 64 numbers the live buckets
-- are sparse, and reading the whole hash once is cheaper (and mends a
-- count that disagrees with its buckets, a hand-edited key).  So a call
-- costs at most 5 reads, never the number of buckets in a window.
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

-- The bucket to count in: `newest` when Redis's clock has stepped back by
-- at most a window since it was written (a failover to a replica, an NTP
-- step), so that counts made "in the future" still count; else current.
-- A larger gap means the key was written under another bucket length: the
-- zone starts afresh in read_zone().
local function ahead(current, newest, span)
  if newest and newest > current and newest - current <= span then
    return newest
  end
  return current
end

-- Reads zone `d` of a request, its key `key`: returns the count in the
-- window, the oldest and newest buckets (0 if none), the count of the
-- current bucket, the buckets to delete as the window slid (false if it
-- did not), the current bucket and its field name; of a GCRA zone, its
-- backlog in us.  Writes nothing but a DEL of a key it starts afresh.
-- `read`, if given, is what run() read of the zone.
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

-- Writes back a zone read by read_zone(): deletes the buckets the window
-- slid past, then counts `add` units in it (of a GCRA zone: moves its TAT
-- by `add` emission intervals).  Deleting first matters under maxmemory:
-- Redis refuses a script's writes with OOM only until it has written
-- something, and HDEL is never refused.  Returns the zone's count and
-- oldest bucket after that.
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

-- Whether a request of cost `c` does not fit in zone `d`, which holds
-- `count` (a GCRA zone: whose backlog is `count` us).
local function over(d, count, c)
  local need = math.max(c, 1)
  if gcra[d] then
    return count + need * gcra[d] > span[d] * gcra[d] + 1
  end
  return need > limit[d] - count
end
