-- The window script, part 8 of 11: a settle.
--
-- A settle adds its delta to its bucket if that bucket is still in the
-- window, never below 0, and answers the count and oldest bucket after it
-- and the units it applied (see window_script.hpp).  In a GCRA zone it
-- moves the TAT by delta turns, never before now (the bucket is not read;
-- a TAT moved back to now is deleted): a request another part of its call
-- rejected gives its turns back.

local function settle(k, entry, reply, r)
  local delta, at, z = string.match(
      entry,
      '^@kEntrySettle@(%-?%d+)@kNumberNext@(%d+)@kNumbersEnd@(.)$')
  delta, at = tonumber(delta), tonumber(at)
  if not (delta and at and math.abs(delta) <= 2^53 and at <= 2^53) then
    error('bad settle')
  end
  local key = keys[k]
  local d = zone_of(byte(z), key)
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
    return 1, 1 + @kRepliesPerZone@
  end
  local count, oldest, newest, here, gone, current, field =
      read_zone(key, d)
  local inside = at <= current and at > current - span[d]
  local was = 0
  if inside and fixed[d] then
    was = count
  elseif inside and gone and gone.t then
    local i, found = find(gone, at)
    was = found and gone.counts[i] or 0
  elseif inside then
    was = at == current and here
          or tonumber(call('HGET', key, fmt('%d', at))) or 0
  end
  local now_at = math.max(0, was + delta)
  if not inside or now_at == was then
    reply[r + 1], reply[r + 2] =
        write_zone(key, d, 0, count, oldest, newest, here, gone,
                   current, field)
    return 1, 1 + @kRepliesPerZone@
  end
  count = count + (now_at - was)
  if oldest == 0 or at < oldest then
    oldest = at
  end
  if gone and gone.t then
    put_bucket(key, d, gone, at, now_at)
    reply[r + 1], reply[r + 2], reply[r + 3] = count, oldest, now_at - was
    return 1, 1 + @kRepliesPerZone@
  end
  if gone then
    drop(key, gone)
  end
  local name = fmt('%d', at)
  local set = fixed[d] and {'t', fmt('%d', count)}
              or {name, fmt('%d', now_at), 't', fmt('%d', count),
                  'o', fmt('%d', oldest)}
  local renew = newest < at
  if renew then
    set[#set + 1], set[#set + 2] = 'n', name
  end
  call('HSET', key, unpack(set))
  if renew then
    local command, when = expiry((at + span[d]) * width[d])
    call(command, key, when)
  end
  reply[r + 1], reply[r + 2], reply[r + 3] = count, oldest, now_at - was
  return 1, 1 + @kRepliesPerZone@
end
