-- The window script, part 4 of 11: side keys (issue 41), a subject's
-- override of its zone's limit, read for the zones of side mode (see
-- window_script.hpp); override.lua reads and applies them.
--
-- reads[d]: side zone d's marker exists, or the call names no markers;
-- only then are its side keys read (one read a zone and a call, not one a
-- request, for zones without overrides); reading: some zone reads.
local reads, reading, marker = {}, false, #keys + 1
for d = 1, marked and zones or 0 do
  marker = marker - (side[d] and 1 or 0)
end
for d = 1, zones do
  if side[d] then
    reads[d] = not marked or call('EXISTS', keys[marker]) == 1
    marker = marker + 1
    reading = reading or reads[d]
  end
end

-- The reply's tail: kOverrideReplies elements for each override an entry
-- was decided under (see window_script.hpp).
local told = {}

