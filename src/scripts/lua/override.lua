-- The window script, part 5 of 11: a subject's override read and applied
-- (see side.lua).  Part of careful_path() (assemble.pl), so that a call
-- that reads no side key does not make these functions.

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

-- The override in force for count key `key` of zone d (whose reads[d]),
-- or false: its side key read once a call, whatever uses it.
local got = {}
local function side_value(d, key)
  local o = got[key]
  if o == nil then
    local v = redis.pcall('GET', base[d] .. string.sub(key, #base[d]))
    o = type(v) == 'string' and override(v) or false
    got[key] = o
  end
  return o
end

-- Zone d as an override of limit l per w ms makes it: a zone of its own,
-- numbered below 0 (never an entry's byte), made once a call, so that
-- every part reads limit[e] and gcra[e] as it reads a zone's.  A GCRA
-- zone's interval is w / l; given l = 0 it keeps its own (over() refuses
-- everything, a settle moves its TAT by its own turns).
local made, derived = 0, {}
local function applied(d, l, w)
  local id = fmt('%d,%d,%d', d, l, w)
  local e = derived[id]
  if not e then
    made = made - 1
    e, derived[id] = made, made
    limit[e], width[e], span[e], fixed[e] = l, width[d], span[d], fixed[d]
    enforce[e], packed[e], bucket[e] = enforce[d], packed[d], bucket[d]
    gcra[e] = gcra[d] and (l > 0 and w * 1000 / l or gcra[d])
  end
  return e
end

-- The zone an entry's zone byte b names for its count key `key`, as its
-- override, if any, applies it.
local function zone_of(b, key)
  local d = b + 1
  local o = reads[d] and side_value(d, key)
  if o then
    return applied(d, o[1], o[2])
  end
  return d
end

-- Tells the overrides of entry number e, whose n zones are its last bytes
-- and whose keys are KEYS[k] on.
local function tell(e, entry, n, k)
  for i = 1, n do
    local d = byte(entry, #entry - n + i) + 1
    local o = reads[d] and side_value(d, keys[k + i - 1])
    if o then
      local q = #told
      told[q + 1], told[q + 2], told[q + 3], told[q + 4], told[q + 5] =
          e, i, o[1], o[2], o[3] == 0 and 0 or o[3] - now
    end
  end
end
