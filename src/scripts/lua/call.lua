-- The window script, part 1 of 11 (assemble.pl joins the parts in its
-- order): the call's time and its zones.  See window_script.hpp for the
-- call and its reply, batch_protocol.hpp for the codes and widths that
-- assemble.pl writes in place of the @names@.
--
-- The Redis module's command (redis_module/batch_decider.cpp) is this
-- script in C++, function for function and Redis command for Redis
-- command: a change here is made there too, and t/19 holds both to one
-- model.
--
-- Numbers go to redis.call as text made by string.format('%d'): Redis 7.0
-- turns a Lua number argument into text with "%.17g", which cost about a
-- tenth of the script's instructions (callgrind).

local call, fmt, tonumber = redis.call, string.format, tonumber
local time = call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local now_us = time[1] * 1000000 + time[2]

-- The command and argument that make a hash key expire at `at` (ms):
-- PEXPIREAT `at`, or where Redis's wall clock has passed it since the call
-- began, PEXPIRE 1.  Redis 7.0 deletes a key at once on a PEXPIREAT its
-- wall clock has passed, though within the call keys live by the call's
-- time (now): a call that ran past a window's end lost the key that its
-- later requests then counted in afresh.  (SET ... PXAT keeps the key.)
-- The clock is read only for an expiry within a second of now: a call
-- that ran a second would have stalled Redis for every client.
local function expiry(at)
  if at - now >= 1000 then
    return 'PEXPIREAT', fmt('%d', at)
  end
  local t = call('TIME')
  if t[1] * 1000 + math.floor(t[2] / 1000) < at then
    return 'PEXPIREAT', fmt('%d', at)
  end
  return 'PEXPIRE', '1'
end

-- A zone's limit, bucket length and span are what nginx sends
-- (window_rules.hpp, zone_numbers_valid(): limit 0 only in side mode, so
-- the mode is read first), and its kind and mode one of the protocol's,
-- or the whole call is refused: an infinite or too large expiry time made
-- Redis delete a key as soon as written or keep it for ever, a limit of
-- NaN let every request pass, and an unknown kind was read as a sliding
-- window, an unknown mode as dry run.
-- The zones of the batch are read once, each with its current bucket
-- number.  A GCRA zone's gcra[d] is its emission interval in us (else
-- false); a side zone's of limit 0, which admits nothing (over()), that
-- of limit 1: only a settle moves its TAT by it, and it must be finite.
-- The number of zones is a number, or one followed by the layout letter:
-- compared, not matched by a pattern, as are a zone's kind and mode
-- (every call reads them; a pattern match costs more).
-- packed[d]: the zone's new keys are packed strings (window.lua), as the
-- letter after the number of zones asks, but a sliding zone's of more
-- buckets than a string's 2-byte bucket numbers reach.
-- marked: the call names marker keys (side.lua), as the letter's marked
-- form says.
local zones, layout = tonumber(ARGV[1])
local marked = false
if not zones then
  layout = string.sub(ARGV[1], -1)
  marked = layout == '@kLayoutPackedMarked@'
           or layout == '@kLayoutHashMarked@'
  if marked then
    layout = layout == '@kLayoutPackedMarked@' and '@kLayoutPacked@'
             or '@kLayoutHash@'
  end
  zones = (layout == '@kLayoutPacked@' or layout == '@kLayoutHash@')
          and tonumber(string.sub(ARGV[1], 1, -2))
end
local limit, width, span, fixed, enforce, gcra = {}, {}, {}, {}, {}, {}
local packed, bucket, base, side, ban = {}, {}, {}, {}, {}
local W = 604800000000000

local function whole(x, most)
  return x and x >= 1 and x <= most and x % 1 == 0
end

-- ban[d]: of an enforced side zone that bans (kZoneEnforcedBan), the ban's
-- length in ms (1 to W), else nil; a malformed one is an unknown mode.
-- A calendar zone's bucket length and span are two period ends A < B
-- (Unix ms: window_rules.hpp, calendar_ends_valid(), or the call is
-- refused): Redis's clock chooses the period, the one ending at A while
-- it is before A, else the one ending at B (calendar_end()), and once it
-- is past B the call is refused, after any other zone error.  The zone is
-- then a fixed window of 1 ms buckets and span 1 whose bucket, `at`, is
-- the period's last ms: its key expires at the period's end, and its
-- settles, leases and peeks are a fixed window's.  Any other zone's `at`
-- is now.
for d = 1, zones do
  local z = 2 + (d - 1) * @kArgsPerZone@
  limit[d] = tonumber(ARGV[z])
  width[d] = tonumber(ARGV[z + 1])
  span[d] = tonumber(ARGV[z + 2])
  local kind, mode = ARGV[z + 3], ARGV[z + 4]
  local at = now
  if kind == '@kZoneCalendar@' then
    local a, b = width[d], span[d]
    if not (whole(a, 2^53) and whole(b, 2^53) and a < b) then
      return {err = "ERR ratelimit: a calendar zone's period ends must be "
                    .. 'whole numbers from 1 to 2^53, the first before '
                    .. 'the second'}
    end
    at = now < a and a - 1 or now < b and b - 1
    width[d], span[d], kind = 1, 1, '@kZoneFixed@'
  end
  if mode and #mode > 1 then
    local m = string.byte(mode)
    base[d] = string.sub(mode, 2)
    if m == @kZoneEnforcedBan.byte@ then
      local length, rest = string.match(base[d],
                                        '^(%d+)@kNumbersEnd@(.+)$')
      ban[d], base[d] = tonumber(length), rest
      m = rest and whole(ban[d], W) and @kZoneEnforcedSide.byte@
    end
    side[d] = m == @kZoneEnforcedSide.byte@ or m == @kZoneDryRunSide.byte@
    mode = m == @kZoneEnforcedSide.byte@ and '@kZoneEnforced@'
           or m == @kZoneDryRunSide.byte@ and '@kZoneDryRun@' or ''
  end
  if not ((whole(limit[d], 2^53) or side[d] and limit[d] == 0)
          and whole(width[d], W) and whole(span[d], W)
          and width[d] * span[d] <= W) then
    return {err = "ERR ratelimit: a zone's limit, bucket and span must "
                  .. 'be whole numbers from 1, the limit at most 2^53, '
                  .. 'bucket * span at most 604800000000000 ms'}
  end
  enforce[d] = mode == '@kZoneEnforced@'
  if not ((kind == '@kZoneSliding@' or kind == '@kZoneFixed@'
           or kind == '@kZoneGcra@')
          and (mode == '@kZoneEnforced@' or mode == '@kZoneDryRun@')) then
    return {err = 'ERR ratelimit: unknown zone kind or mode'}
  end
  if not at then
    return {err = "ERR ratelimit: redis's clock is past the calendar "
                  .. 'periods nginx sent'}
  end
  fixed[d] = kind == '@kZoneFixed@'
  gcra[d] = kind == '@kZoneGcra@'
            and width[d] * 1000 / math.max(limit[d], 1)
  packed[d] = layout == '@kLayoutPacked@' and (fixed[d] or span[d] <= 65536)
  bucket[d] = math.floor(at / width[d])
end

local byte = string.byte
local keys = KEYS
