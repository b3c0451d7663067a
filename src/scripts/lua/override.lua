-- The window script, part 5 of 11: a subject's override and ban read and
-- applied, and its ban written (see side.lua).  Part of careful_path()
-- (assemble.pl), so that a call that reads no side key does not make
-- these functions.

-- The override in force that side value v holds: its limit, window in ms
-- and the Redis time in ms it lapses at (0: never), or nil.  The PUT's
-- script (scripts/override_call.cpp) reads the limit it replaces alike.
local function override(v)
  local l, w, x = string.match(
      '@kSidePartNext@' .. v .. '@kSidePartNext@',
      '@kSidePartNext@@kSideOverride@@kSideTagEnd@(%d+)@kNumberNext@'
      .. '(%d+)@kNumberNext@(%d+)@kSidePartNext@')
  l, w, x = tonumber(l), tonumber(w), tonumber(x)
  if l and l <= 2^53 and w >= 1 and w <= W and x <= 2^53
     and (x == 0 or x > now) then
    return {l, w, x}
  end
end

-- The end (Redis ms) of the ban in force that side value v holds, its
-- first part of the form "b=END", or nil: in force while now < END <=
-- 2^53.
local function banned_till(v)
  local till = tonumber(string.match(
      '@kSidePartNext@' .. v .. '@kSidePartNext@',
      '@kSidePartNext@@kSideBan@@kSideTagEnd@(%d+)@kSidePartNext@'))
  return till and till > now and till <= 2^53 and till or nil
end

-- What side value v (a string, else none) holds in force: false for
-- nothing, else {o = the override or false, b = the ban's end or false}.
local function held(v)
  if type(v) ~= 'string' then
    return false
  end
  local o, b = override(v) or false, banned_till(v) or false
  return (o or b) and {o = o, b = b}
end

-- What is in force for count key `key` of zone d (whose reads[d]), as
-- held() says: its side key read once a call, whatever uses it.
local got = {}
local function side_key(d, key)
  return base[d] .. string.sub(key, #base[d])
end
local function side_value(d, key)
  local s = got[key]
  if s == nil then
    s = held(redis.pcall('GET', side_key(d, key)))
    got[key] = s
  end
  return s
end

-- Zone d as an override o (or none: false) and a ban in force (`b`) make
-- it: a zone of its own, numbered below 0 (never an entry's byte), made
-- once a call, so that every part reads limit[e] and gcra[e] as it reads
-- a zone's.  A GCRA zone's interval is w / l; given l = 0 it keeps its
-- own (over() refuses everything, a settle moves its TAT by its own
-- turns).  barred[e]: a ban is in force, over() refuses everything;
-- origin[e]: d.
local made, derived, barred, origin = 0, {}, {}, {}
local function applied(d, o, b)
  local id = o and fmt('%d,%d,%d,%d', d, o[1], o[2], b and 1 or 0)
             or fmt('%d,%d', d, b and 1 or 0)
  local e = derived[id]
  if not e then
    made = made - 1
    e, derived[id] = made, made
    limit[e], width[e], span[e], fixed[e] =
        o and o[1] or limit[d], width[d], span[d], fixed[d]
    enforce[e], packed[e], bucket[e] = enforce[d], packed[d], bucket[d]
    gcra[e] = gcra[d] and (o and o[1] > 0 and o[2] * 1000 / o[1] or gcra[d])
    ban[e], barred[e], origin[e] = ban[d], b, d
  end
  return e
end

-- The zone an entry's zone byte b names for its count key `key`, as its
-- override and ban, if any, apply it.
local function zone_of(b, key)
  local d = b + 1
  local s = reads[d] and side_value(d, key)
  if s then
    return applied(d, s.o, s.b)
  end
  return d
end

-- Sets the ban of zone d's subject of count key `key` (zone d, or the
-- zone it was derived from, enforced and banning), ending ban[d] ms from
-- now: its side key's value keeps its
-- other parts, its ban part replaced; the key expires at the latest end
-- of its parts (PTTL: none where it had no expiry and keeps a part), and
-- is a member of the zone's marker of that score (+inf: none), the marker
-- kept as the status API's PUT keeps it (scripts/override_call.cpp).
-- From now on the call reads zone d's side keys, and the entry's tell()
-- says it set the ban, and tells no override it was not decided under
-- (`unread`: zone d read no side keys before).
local function ban_subject(d, key)
  local till = now + ban[d]
  d = origin[d] or d
  local side = side_key(d, key)
  local v, keep, at = redis.pcall('GET', side), {}, till
  if type(v) == 'string' then
    for part in string.gmatch(v, '[^@kSidePartNext@]+') do
      if string.sub(part, 1, 2) ~= '@kSideBan@@kSideTagEnd@' then
        keep[#keep + 1] = part
      end
    end
    local ttl = call('PTTL', side)
    if ttl == -1 and #keep > 0 then
      at = false
    elseif ttl > 0 then
      at = math.max(till, now + ttl)
    end
  end
  keep[#keep + 1] = '@kSideBan@@kSideTagEnd@' .. fmt('%d', till)
  v = table.concat(keep, '@kSidePartNext@')
  if at then
    call('SET', side, v, 'PXAT', fmt('%d', at))
  else
    call('SET', side, v)
  end
  local m = mark[d]
  if m then
    redis.pcall('ZADD', m, at and fmt('%d', at) or '+inf', side)
    redis.pcall('ZREMRANGEBYSCORE', m, '-inf', fmt('%d', now))
    local top = redis.pcall('ZRANGE', m, -1, -1, 'WITHSCORES')
    if type(top) == 'table' and top[2] == 'inf' then
      redis.pcall('PERSIST', m)
    elseif type(top) == 'table' and top[2] then
      redis.pcall('PEXPIREAT', m, top[2])
    end
  end
  local s = held(v)
  s.set, s.unread = true, not reads[d]
  got[key], reads[d], reading = s, true, true
end

-- Tells the overrides and bans of entry number e, whose n zones are its
-- last bytes and whose keys are KEYS[k] on; a ban this entry set, once.
local function tell(e, entry, n, k)
  for i = 1, n do
    local d = byte(entry, #entry - n + i) + 1
    local s = reads[d] and side_value(d, keys[k + i - 1])
    local o, b = s and s.o, s and s.b
    if o and not s.unread then
      local q = #told
      told[q + 1], told[q + 2], told[q + 3], told[q + 4], told[q + 5] =
          e, i, o[1], o[2], o[3] == 0 and 0 or o[3] - now
    end
    if b then
      local q = #told
      told[q + 1], told[q + 2], told[q + 3], told[q + 4], told[q + 5] =
          e, i, s.set and b - now or 0, @kToldBanWindow@, b - now
      s.set, s.unread = false, false
    end
  end
end
