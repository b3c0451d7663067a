-- The window script, part 9 of 11: a lease (see window_script.hpp).
--
-- It reads its zone as a request does (the window slides, a clock stepped
-- back counts in the newest bucket), grants g = min(asked, max(limit -
-- count, 0)) units (none while the subject's ban is in force; a lease
-- never sets one: the request it fails to serve is decided exactly) and
-- counts them as an entry of costs counts a cost of g (g = 0 writes what
-- a peek would).  Its errors are raised before
-- anything is read: a lease of several zones, a malformed one, one of a
-- GCRA or dry-run zone.

local function lease(k, entry, reply, r)
  local list, z = string.match(
      entry, '^@kEntryLease@([%d@kNumberNext@]+)@kNumbersEnd@(.*)$')
  if z and (#z > 1 or string.find(list, '@kNumberNext@', 1, true)) then
    error({err = 'ERR ratelimit: a lease is of one zone'})
  end
  local asked = z and tonumber(list)
  local d = z and #z == 1 and zone_of(byte(z), keys[k])
  if not (asked and asked <= 2^53 and limit[d]) then
    error({err = 'ERR ratelimit: malformed lease'})
  elseif gcra[d] then
    error({err = 'ERR ratelimit: lease of a GCRA zone'})
  elseif not enforce[d] then
    error({err = 'ERR ratelimit: lease of a dry-run zone'})
  end
  local key = keys[k]
  local count, oldest, newest, here, gone, current, field =
      read_zone(key, d)
  local g = barred[d] and 0
            or math.min(asked, math.max(limit[d] - count, 0))
  reply[r] = g == 0 and asked > 0 and 1 or 0
  reply[r + 1], reply[r + 2] =
      write_zone(key, d, g, count, oldest, newest, here, gone, current,
                 field)
  reply[r + 3], reply[r + 4] = over(d, count, asked) and 1 or 0, g
  return 1, 1 + @kRepliesPerZone@ + @kLeaseGrantReplies@
end
