-- The window script, part 6 of 11: a zone's key read and written.
--
-- A window zone's key is a hash or a packed string (below), written in
-- the layout the call asks for new keys (packed[d]): where that is a
-- string, a hash is read whole (unhashed()) and any write (a count, a
-- settle, a slide) makes it the string of the same counts and expiry;
-- where it is a hash, a string's write makes it that hash.  A read that
-- writes nothing leaves the key as it is.  A hash, sliding window: "t"
-- the count of the live buckets, "o" the oldest non-empty bucket, "n" the
-- newest one, and one field per non-empty bucket, named by its absolute
-- number, holding its count (a settle that gave units back may leave one
-- holding 0).  Buckets older than the window are deleted as the window
-- slides past them, each exactly once, so the work per call does not grow
-- with the number of buckets in a window; "t" saves summing them.  Fixed
-- window: "t" the count and "n" the window's number.  Either way the key
-- expires when its newest count leaves the window, so idle subjects cost
-- nothing, and a key written under another algorithm or bucket length is
-- recognised and started afresh.  A GCRA zone's key: see gcra.lua.
--
-- A request of cost c (1 for a counted entry, each zone's own for one of
-- costs) does not fit in a zone when max(c, 1) > limit - count: a cost of
-- 0 checks, counting nothing.  Written so, not count + c > limit, it is
-- exact to 2^53: a double rounds 2^53 + 1 to 2^53.

-- Each zone's current bucket number as a hash's field names it, made as
-- first asked for (a zone an override made included: side.lua).
local bucket_field = setmetatable({}, {__index = function(t, d)
  t[d] = fmt('%d', bucket[d])
  return t[d]
end})

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

local function fresh()
  return {w = 1, b = 0, ids = {}, counts = {}, t = 0}
end

local function unpacked(s, f)
  local n, w = #s, byte(s, 1)
  if f then
    if n == 16 then
      local id, t = sunpack('<I8I8', s)
      return {ids = {id}, counts = {t}, t = t}
    end
    return
  end
  local k = (n - 17) / (2 + (w or 1))
  if not (w == 1 or w == 2 or w == 4 or w == 8) or k < 1 or k % 1 ~= 0 then
    return
  end
  local p = {w = w, b = sunpack('<I8', s, 2), ids = {}, counts = {},
             t = sunpack('<I8', s, n - 7)}
  for i = 1, k do
    local id, c = sunpack(entry_format[w], s, 8 + i * (2 + w) - w)
    p.ids[i], p.counts[i] = p.b + id, c
  end
  return p
end

-- Whether x is a whole number from 0 to 2^63: a hash's bucket number or
-- count that 8 bytes hold.
local function natural(x)
  return x and x >= 0 and x <= 2^63 and x % 1 == 0
end

-- A hash read whole into p, where new keys are strings: a fixed window's
-- "n" and "t", a sliding one's buckets (fields named by whole numbers) if
-- "t", "o" and "n" are numbers, as the hash's own read wants them, and its
-- total their sum; nil where it holds no bucket of natural() numbers, or
-- a total above 2^63 (a hash of junk, or of other fields: read as a hash).
local function unhashed(key, d)
  local all = fixed[d] and call('HMGET', key, 'n', 't')
              or call('HGETALL', key)
  local p, c = fresh(), {}
  for j = 1, #all, 2 do
    local id, n = tonumber(all[j]), tonumber(all[j + 1])
    c[all[j]] = n
    if natural(id) and natural(n) then
      if not c[id] then
        p.ids[#p.ids + 1] = id
      end
      c[id] = (c[id] or 0) + n
    end
  end
  table.sort(p.ids)
  for i, id in ipairs(p.ids) do
    p.counts[i], p.t = c[id], p.t + c[id]
  end
  return (fixed[d] or c.t and c.o and c.n) and p.ids[1] and natural(p.t)
         and p
end

-- Writes p whole in the layout of new keys: a string (SET ... PXAT), or
-- where new keys are hashes, the hash of its buckets (DEL, HSET, 256
-- fields a call, expiry()), either expiring when its newest bucket leaves
-- the window.
local function rewrite(key, d, p)
  local ids, k = p.ids, #p.ids
  local at = fmt('%d', (ids[k] + span[d]) * width[d])
  local s = spack('<I8I8', ids[1], p.t)
  if not packed[d] then
    local h = {'t', fmt('%d', p.t), 'n', fmt('%d', ids[k])}
    if not fixed[d] then
      h[5], h[6] = 'o', fmt('%d', ids[1])
      for i = 1, k do
        h[5 + 2 * i] = fmt('%d', ids[i])
        h[6 + 2 * i] = fmt('%d', p.counts[i])
      end
    end
    call('DEL', key)
    for i = 1, #h, 512 do
      call('HSET', key, unpack(h, i, math.min(i + 511, #h)))
    end
    local command, when = expiry((ids[k] + span[d]) * width[d])
    return call(command, key, when)
  elseif not fixed[d] then
    for i = 1, k do
      p.w = math.max(p.w, width_of(p.counts[i]))
    end
    if ids[1] < p.b or ids[k] - p.b >= 65536 then
      p.b = ids[1]
    end
    local parts = {spack('<BI8', p.w, p.b)}
    for i = 1, k do
      parts[i + 1] = spack(entry_format[p.w], ids[i] - p.b, p.counts[i])
    end
    parts[k + 2] = spack('<I8', p.t)
    s = table.concat(parts)
  end
  call('SET', key, s, 'PXAT', at)
end

-- Where bucket `at` is or goes in p, and whether it is there.
local function find(p, at)
  local ids, i = p.ids, 1
  while ids[i] and ids[i] < at do
    i = i + 1
  end
  return i, ids[i] == at
end

-- Bucket `at` of p (a fixed window: its window) holds `value` units, the
-- total changed by as many: in place where it is the newest bucket of the
-- string read, nothing slid, and its width holds `value`.
local function put_bucket(key, d, p, at, value)
  local ids, counts, k = p.ids, p.counts, #p.ids
  local i, found = find(p, at)
  p.t = p.t + (value - (found and counts[i] or 0))
  if not found then
    table.insert(ids, i, at)
    table.insert(counts, i, value)
  end
  counts[i] = value
  if not (found and p.s) or p.slid or i < k
     or not fixed[d] and width_of(value) > p.w then
    return rewrite(key, d, p)
  end
  if fixed[d] then
    call('SETRANGE', key, 8, spack('<I8', value))
  else
    call('SETRANGE', key, 9 + (2 + p.w) * k - p.w,
         spack(pair_format[p.w], value, p.t))
  end
end

-- read_zone() of a packed string `s` (false: no key), or of a hash read
-- whole into `p` (`s` GET's error): as a hash's, the window's buckets slid
-- past cut from p, written by write_zone().  A string of the other kind of
-- window (sliding, fixed) is started afresh.
local function read_packed(key, d, s, p)
  local current, field, first, m = bucket[d], bucket_field[d]
  p = p or s and unpacked(s, fixed[d])
  if s and not (p or unpacked(s, not fixed[d])) then
    call('HGET', key, 't')
  elseif p then
    m = p.ids[#p.ids]
    current = ahead(current, m, span[d])
    first = current - span[d] + 1
    if m < first or m > current or not fixed[d] and span[d] > 65536 then
      p = nil
    end
  end
  if current ~= bucket[d] then
    field = fmt('%d', current)
  end
  if not p then
    if s then
      call('DEL', key)
    end
    return 0, 0, -1, 0, packed[d] and fresh(), current, field
  end
  local ids, counts, k = p.ids, p.counts, #p.ids
  p.s = packed[d] and type(s) == 'string'
  local i = 1
  while ids[i] < first do
    p.t, i = p.t - counts[i], i + 1
  end
  if i > 1 then
    p.ids, p.counts, p.slid = {unpack(ids, i)}, {unpack(counts, i)}, true
  end
  return p.t, p.ids[1], m, not fixed[d] and m == current and counts[k] or 0,
      p, current, field
end

-- Reads zone `d` of a request, its key `key`: returns the count in the
-- window, the oldest and newest buckets (0 and -1 if none: bucket 0 is
-- one, of a window of 604800000000000 ms), the count of the
-- current bucket, the buckets to delete as the window slid (false if it
-- did not; a packed string's or new packed key's: p), the current bucket
-- and its field name; of a GCRA zone, its backlog in us.  Writes nothing
-- but a DEL of a key it starts afresh.  `read`, if given, is what GET
-- answered run() (false: no key, read again).
local function read_zone(key, d, read)
  if gcra[d] then
    local tat = redis.pcall('GET', key)
    if type(tat) == 'table' then
      call('DEL', key)
    end
    tat = tonumber(tat) or 0
    return math.max(tat - now_us, 0), 0, 0, 0, false, 0, ''
  end
  read = read or redis.pcall('GET', key)
  local p = type(read) == 'table' and packed[d] and unhashed(key, d)
  if p or type(read) == 'string' or not read and packed[d] then
    return read_packed(key, d, read, p)
  end
  read = not read and {}
  local current, field = bucket[d], bucket_field[d]
  local count, oldest, newest, here, gone = 0, 0, -1, 0, false

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
      gone = packed[d] and fresh()
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
      gone = packed[d] and fresh()
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
  if gone and gone.t then
    if add > 0 then
      put_bucket(key, d, gone, current, (fixed[d] and count or here) + add)
      return count + add, oldest == 0 and current or oldest
    elseif gone.slid then
      rewrite(key, d, gone)
    end
    return count, oldest
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
      local command, when = expiry((current + span[d]) * width[d])
      call(command, key, when)
    end
    count = count + add
  elseif gone then
    call('HSET', key, 't', fmt('%d', count), 'o', fmt('%d', oldest))
  end
  return count, oldest
end

-- Whether a request of cost `c` does not fit in zone `d`, which holds
-- `count` (a GCRA zone: whose backlog is `count` us).  A zone of limit 0,
-- a side zone's own or an override's, fits nothing (a window's count is 0
-- or more as the script writes it), nor does one whose subject's ban is
-- in force (override.lua's barred).
local function over(d, count, c)
  if barred[d] then
    return true
  end
  local need = math.max(c, 1)
  if gcra[d] then
    return limit[d] == 0 or count + need * gcra[d] > span[d] * gcra[d] + 1
  end
  return need > limit[d] - count
end
