-- The window script, part 2 of 11: a GCRA zone's key.
--
-- A GCRA zone's key is a string, the subject's theoretical arrival time
-- (TAT) in microseconds of Redis time, set with its expiry (SET PXAT:
-- Redis 6.2) a window (the time `limit` requests take) after that time,
-- when its backlog is gone: a subject seen again within a window finds its
-- key, as a window zone's does, rather than making it anew; a key of
-- another type is started afresh.  The script reads and writes it as the
-- backlog `ahead`, the TAT less now, in us.

-- Sets the TAT of zone `d` in `key` to `ahead` us after now.
local function set_tat(key, d, ahead)
  local tat = now_us + ahead
  call('SET', key, fmt('%d', math.floor(tat + 0.5)),
       'PXAT', fmt('%d', math.ceil(tat / 1000) + width[d]))
end
