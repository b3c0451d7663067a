-- A candidate layout's script, for measurement only (cost.pl; not the
-- module's script): counted requests of one zone, one a key, decided as
-- the window script's fast path decides them, on a packed string.
--
-- ARGV as the window script's for one zone (1, limit, bucket ms, span,
-- kind, enforced), then one entry a key (ignored: each counts 1).
-- A sliding key: '<' B w (bytes a count), I8 base bucket, then per live
-- bucket, oldest first, I2 (its number - base) and I<w> its count, and
-- last I8 the total.  A fixed key: I8 the window's number, I8 its count.
-- GET reads it; a new bucket, window or key is one SET ... PXAT of the
-- whole string, and so is a count in the newest bucket (or window) unless
-- `in_place`: then one SETRANGE of the bytes that change, at the end
-- (cost.pl runs both, setting it).  No slide, settle, lease or error path:
-- the scenarios measured need none.
local in_place = true
local call, fmt = redis.call, string.format
local pack, unpack = struct.pack, struct.unpack
local time = call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local limit, width, span = tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4])
local fixed = ARGV[5] == 'f'
local bucket = math.floor(now / width)
local expire = fmt('%d', (bucket + span) * width)
local replies = {now}

local function answer(r, over, count, oldest)
  replies[r], replies[r + 1], replies[r + 2], replies[r + 3] =
    over and 1 or 0, count, oldest, over and 1 or 0
end

local function decide_fixed(key, s, r)
  local n, t = 0, 0
  if s then
    n, t = unpack('<I8I8', s)
  end
  if n ~= bucket then
    t = 0
  end
  if 1 > limit - t then
    return answer(r, true, t, bucket)
  elseif n == bucket and in_place then
    call('SETRANGE', key, 8, pack('<I8', t + 1))
  else
    call('SET', key, pack('<I8I8', bucket, t + 1), 'PXAT', expire)
  end
  answer(r, false, t + 1, bucket)
end

local function decide_sliding(key, s, r)
  if not s then
    call('SET', key, pack('<BI8I2BI8', 1, bucket, 0, 1, 1), 'PXAT', expire)
    return answer(r, false, 1, bucket)
  end
  local len = #s
  local w, base = unpack('<BI8', s)
  local cw = 'I' .. w
  local id, here, t = unpack('<I2' .. cw .. 'I8', s, len - 9 - w)
  local oldest = base + unpack('<I2', s, 10)
  if 1 > limit - t then
    return answer(r, true, t, oldest)
  elseif base + id == bucket and in_place then
    call('SETRANGE', key, len - 8 - w, pack('<' .. cw .. 'I8', here + 1,
                                            t + 1))
  elseif base + id == bucket then
    call('SET', key, string.sub(s, 1, len - 8 - w)
         .. pack('<' .. cw .. 'I8', here + 1, t + 1), 'PXAT', expire)
  else
    call('SET', key, string.sub(s, 1, len - 8)
         .. pack('<I2' .. cw .. 'I8', bucket - base, 1, t + 1),
         'PXAT', expire)
  end
  answer(r, false, t + 1, oldest)
end

for k = 1, #KEYS do
  local key = KEYS[k]
  local s = call('GET', key)
  if fixed then
    decide_fixed(key, s, 2 + 4 * (k - 1))
  else
    decide_sliding(key, s, 2 + 4 * (k - 1))
  end
end
return replies
