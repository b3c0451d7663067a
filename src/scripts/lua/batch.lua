-- The window script, part 11 of 11: the batch entry.  Its fast path takes
-- most requests; the careful path (parts 5 to 10, which assemble.pl wraps
-- in careful_path()) is built on a call's first request that needs it.

-- The reply, one flat array (see window_script.hpp).
local replies = {now}
local entries = #ARGV

-- The zone of an entry that counts 1 unit in one zone, by the entry's
-- text: run() takes those itself, but not a side zone's of limit 0,
-- which admits a request only under its subject's override: careful()
-- applies that or rejects (over() refuses limit 0; run_gcra() does not
-- look at the limit).  Once a zone and a call, not once a request.
local solo = {}
for d = 1, zones do
  if limit[d] > 0 then
    solo['@kEntryCount@' .. string.char(d - 1)] = d
  end
end

-- The next entry's argument, its first key and its reply's first element;
-- the argument before the first entry.
local a, k, r = 2 + zones * @kArgsPerZone@, 1, 2
local first = a - 1

-- decide() under pcall: an error (a key of another type, OOM) takes the
-- place of that request's `rejected`, its counts are zeros, and the other
-- requests are still decided.  Then the entry tells its overrides, those
-- decide() read and any it did not reach.
local decide, shape, side_value, tell
local function build()
  if not decide then
    decide, shape, side_value, tell = careful_path()
  end
end

local function careful(read)
  build()
  local entry = ARGV[a]
  local ok, n, width = pcall(decide, k, entry, replies, r, read)
  if not ok then
    replies[r] = type(n) == 'table' and n or {err = tostring(n)}
    n, width = shape(entry)
    for q = r + 1, r + width - 1 do
      replies[q] = 0
    end
  end
  if reading then
    tell(a - first, entry, n, k)
  end
  a, k, r = a + 1, k + n, r + width
end

-- The end of run()'s request: the next entry, key and reply.
local function next_entry()
  a, k, r = a + 1, k + 1, r + (1 + @kRepliesPerZone@)
end

-- Whether run()'s request in zone d, whose side keys are read, is under
-- an override or a ban: careful() takes it.
local function overridden(d)
  build()
  return side_value(d, keys[k])
end


-- run()'s counted request of one GCRA zone: its TAT read (GET) and, if it
-- fits, moved (SET).  A key of another type raises before anything is
-- written.  A request a banning zone refuses goes to careful(), which bans
-- (so in run_window() and run_hash() too).
local function run_gcra(d)
  local key, t = keys[k], gcra[d]
  local ahead = math.max((tonumber(call('GET', key)) or 0) - now_us, 0)
  if ahead + t > span[d] * t + 1 and ban[d] then
    return careful(nil)
  elseif ahead + t > span[d] * t + 1 then
    replies[r] = enforce[d] and 1 or 0
    replies[r + 1], replies[r + 2], replies[r + 3] =
        math.floor(ahead + 0.5), 0, 1
  else
    set_tat(key, d, ahead + t)
    replies[r] = 0
    replies[r + 1], replies[r + 2], replies[r + 3] =
        math.floor(ahead + t + 0.5), 0, 0
  end
  next_entry()
end

-- What run_window() makes of a packed string `s` of zone d, reading only
-- its ends (a request's cost does not grow with its live buckets), each in
-- one unpack: the count in the window, its oldest bucket, and where a
-- request's unit goes: the byte of the newest count (from 1) and that
-- count, which SETRANGE changes with the total; or for a new bucket
-- (sliding), the byte from which the buckets are kept, those before it
-- slid past, and `cut` their units.  nil where careful() must take it:
-- another shape, another window (fixed), a newest bucket ahead of the
-- clock, a count outgrowing its width, a base to move.
local function glance(s, d)
  local n, current = #s, bucket[d]
  if fixed[d] then
    if n ~= 16 then
      return
    end
    local id, t = sunpack('<I8I8', s)
    if id == current then
      return t, id, 9, false
    end
    return
  end
  local w = byte(s, 1)
  local k = (n - 17) / (2 + (w or 1))
  if not (w == 1 or w == 2 or w == 4 or w == 8) or k < 1 or k % 1 ~= 0 then
    return
  end
  local b, oldest = sunpack('<I8I2', s, 2)
  local newest, c, t = sunpack(tail_format[w], s, n - 9 - w)
  local first, at, cut = current - span[d] + 1, 10, 0
  newest, oldest = b + newest, b + oldest
  if newest == current then
    if oldest >= first and width_of(c + 1) <= w then
      return t, oldest, n - 7 - w, false, c
    end
    return
  end
  if newest > current or newest < first or current - b >= 65536 then
    return
  end
  while b + sunpack('<I2', s, at) < first do
    cut = cut + sunpack(count_format[w], s, at + 2)
    at = at + 2 + w
  end
  return t - cut, b + sunpack('<I2', s, at), at, cut
end

-- One unit counted in zone d's key as glance() read it (`s` false: no
-- key): in place (the newest count c), or the string made with a new
-- bucket at its end.
local function count_in(key, d, s, count, at, cut, c)
  if s and not cut then
    return call('SETRANGE', key, fmt('%d', at - 1), fixed[d]
                and spack('<I8', count + 1)
                or spack(pair_format[byte(s, 1)], c + 1, count + 1))
  end
  local at_ms = fmt('%d', (bucket[d] + span[d]) * width[d])
  if not s then
    return call('SET', key, fixed[d] and spack('<I8I8', bucket[d], 1)
                or spack('<BI8I2I1I8', 1, bucket[d], 0, 1, 1), 'PXAT', at_ms)
  end
  call('SET', key, string.sub(s, 1, 9) .. string.sub(s, at, #s - 8)
       .. spack(tail_format[byte(s, 1)],
                bucket[d] - sunpack('<I8', s, 2), 1, count + 1),
       'PXAT', at_ms)
end

-- run()'s counted request of one window zone, taken here where new keys
-- are strings when its key is a packed string that glance() reads, or no
-- key.  That is most requests; taken here, a request costs Redis a sixth
-- (sliding) to a quarter (fixed) fewer instructions than through
-- careful() (callgrind, on hashes), mostly function calls and pcalls
-- saved.  Everything else, a hash's request among them, and a rejected
-- one whose window slid past any bucket (the cut is written, buckets of 0
-- units too: at > 10, the first kept bucket's byte), goes to careful(),
-- with what GET answered.
local function run_window(d)
  local key = keys[k]
  local s = d and redis.pcall('GET', key)
  local count, oldest, at, cut, c
  if packed[d] and type(s) == 'string' then
    count, oldest, at, cut, c = glance(s, d)
  elseif packed[d] and s == false then
    count, oldest = 0, bucket[d]
  end
  local out = count and 1 > limit[d] - count
  if not count or out and (ban[d] or cut and at > 10) then
    return careful(s)
  end
  if not out then
    count_in(key, d, s, count, at, cut, c)
  end
  replies[r], replies[r + 1], replies[r + 2], replies[r + 3] =
      out and enforce[d] and 1 or 0, out and count or count + 1, oldest,
      out and 1 or 0
  next_entry()
end

-- run()'s counted request of one window zone whose new keys are hashes
-- (layout=hash while a fleet is upgraded, or a sliding zone of more
-- buckets than a string holds): the hash's fields read by one HMGET and
-- counted by one HSET, when it needs nothing deleted: counted in the
-- bucket (or fixed window) it was last counted in, in a new bucket, or in
-- a new key.  "+ 0" raises on a field that is not a number, as HMGET on a
-- string raises WRONGTYPE, before anything is written; after the HSET
-- nothing raises.  Everything else goes to careful(), which reads again.
local function run_hash(d)
  local key, current = keys[k], bucket[d]
  local field, first = fmt('%d', current), current - span[d] + 1
  local take, h, count, oldest, same = true
  if fixed[d] then
    h = call('HMGET', key, 't', 'n')
    same = h[2] == field
    if same then
      count, oldest = h[1] + 0, current
    else
      count, oldest, take = 0, 0, not (h[1] or h[2])
    end
  else
    h = call('HMGET', key, 't', 'o', 'n', field)
    local newest = h[3]
    if newest then
      count, oldest = h[1] + 0, h[2] + 0
      same = newest == field
      if not same then
        newest = newest + 0
        same = newest == current
        take = newest <= current and newest >= first
      end
      take = take and oldest >= first
    else
      count, oldest, same, take = 0, 0, false, not (h[1] or h[2])
    end
  end
  if not take then
    return careful(nil)
  end
  local out = 1 > limit[d] - count
  if out and ban[d] then
    return careful(nil)
  end
  if not out then
    local total = fmt('%d', count + 1)
    if oldest == 0 then
      oldest = current
    end
    if fixed[d] and same then
      call('HSET', key, 't', total)
    elseif fixed[d] then
      call('HSET', key, 't', total, 'n', field)
    elseif same then
      call('HSET', key, field, fmt('%d', h[4] + 1), 't', total)
    else
      call('HSET', key, field, '1', 't', total, 'o', fmt('%d', oldest),
           'n', field)
    end
  end
  replies[r], replies[r + 1], replies[r + 2], replies[r + 3] =
      out and enforce[d] and 1 or 0, out and count or count + 1, oldest,
      out and 1 or 0
  if not (out or same) then
    local command, when = expiry((current + span[d]) * width[d])
    local w = redis.pcall(command, key, when)
    if type(w) == 'table' then
      replies[r], replies[r + 1], replies[r + 2], replies[r + 3] =
          w, 0, 0, 0
    end
  end
  next_entry()
end

-- The requests one after another, as if each were its own call, but at
-- one Redis time, into one flat reply.  Anything in run() that raises (a
-- field that is not a number, a key of another type, OOM) does so before
-- it writes, or in the one write that failed: run() is left, and careful()
-- takes that request again from the start.
local function run()
  while a <= entries do
    local d = solo[ARGV[a]]
    if d and reads[d] and overridden(d) then
      careful(nil)
    elseif d and gcra[d] then
      run_gcra(d)
    elseif d and not packed[d] then
      run_hash(d)
    else
      run_window(d)
    end
  end
end

while not pcall(run) do
  careful(nil)
end

local q = #replies
for i = 1, #told do
  replies[q + i] = told[i]
end

return replies
