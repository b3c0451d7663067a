-- The window script, part 10 of 11: one request on the careful path.
--
-- A request that does not fit in an enforced zone is counted in no zone.
-- A request that passes is counted, c units, in every zone it fits in; a
-- dry-run zone it does not fit in does not count it, as if it had been
-- rejected there.  A counted request ("c", "w") that a banning zone's
-- limit, above 0, refuses bans its subject there (bans(); ban_subject(),
-- once the zone is written); one its ban in force refuses fits nowhere and
-- sets nothing.

-- Whether a counted request zone d (as zone_of() applies it) refuses bans
-- its subject: d bans, its limit (an override's where one applies) is
-- above 0, and no ban in force refused it.  A limit of 0 is a plan
-- blocked, not a subject's excess: a ban would outlive its unblocking.
local function bans(d)
  return ban[d] and limit[d] > 0 and not barred[d]
end

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
    local key, c = keys[k], cost and cost[1] or 1
    local d = zone_of(byte(zones, 2), key)
    local count, oldest, newest, here, gone, current, field =
        read_zone(key, d, read)
    local out = over(d, count, c)
    reply[r] = out and enforce[d] and 1 or 0
    reply[r + 1], reply[r + 2] =
        write_zone(key, d, counting and not out and c or 0, count,
                   oldest, newest, here, gone, current, field)
    reply[r + 3] = out and 1 or 0
    if out and counting and bans(d) then
      ban_subject(d, key)
    end
    return 1, 1 + @kRepliesPerZone@
  end

  local rejected = false

  for i = 1, n do
    local d = zone_of(byte(zones, i + 1), keys[k + i - 1])
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
    if out and counting and bans(d) then
      ban_subject(d, keys[k + i - 1])
    end
  end
  return n, 1 + @kRepliesPerZone@ * n
end
