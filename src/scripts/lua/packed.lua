-- The window script, part 3 of 11: a window's packed string, as both of a
-- request's paths read and write it (batch.lua's fast path, window.lua's
-- careful one).
--
-- A packed string (redis_module/zones/packed_window.hpp): little-endian
-- integers.  Sliding: a byte, the width of a count (1, 2, 4 or 8 bytes),
-- the base bucket number (8), then per live bucket, oldest first, its
-- number less the base (2) and its count, last the total (8).  Fixed: the
-- window's number and its count (8 each).  Read into a table p: w width,
-- b base, ids and counts the buckets, t total, s true where the key holds
-- it as a string and new keys are strings (it may change in place), slid
-- where buckets were cut.  A string of another shape is another type's
-- key: WRONGTYPE (Redis's own, an HGET raises it), left alone.  A new
-- key's width is the smallest that holds its counts, widened as a
-- count outgrows it, never narrowed; its base the oldest bucket where that
-- is older or the newest 65,536 or more past it.  A count in the newest
-- bucket is changed in place (SETRANGE); any other write makes the string
-- anew at its exact size (SET ... PXAT), expiring when its newest bucket
-- leaves the window.
local spack, sunpack = struct.pack, struct.unpack

-- The struct formats of a string's counts by their width w, spelt out: a
-- number put in a format by `..` is printed by sprintf at each use, the
-- fast path's costliest step when it was.  A bucket
-- (its number less the base, its count), a count alone, a count and the
-- total, the newest bucket and the total.
local entry_format = {'<I2I1', '<I2I2', [4] = '<I2I4', [8] = '<I2I8'}
local count_format = {'<I1', '<I2', [4] = '<I4', [8] = '<I8'}
local pair_format = {'<I1I8', '<I2I8', [4] = '<I4I8', [8] = '<I8I8'}
local tail_format = {'<I2I1I8', '<I2I2I8', [4] = '<I2I4I8', [8] = '<I2I8I8'}

-- The width of a count c: the fewest bytes of 1, 2, 4 or 8 that hold it.
local function width_of(c)
  return c < 2^8 and 1 or c < 2^16 and 2 or c < 2^32 and 4 or 8
end
