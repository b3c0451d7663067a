-- The window script, part 4 of 11: side keys (issue 41), a subject's
-- override of its zone's limit and its ban in the zone (issue 43), read
-- for the zones of side mode (see window_script.hpp); override.lua reads,
-- applies and writes them.
--
-- reads[d]: side zone d's marker exists, or the call names no markers;
-- only then are its side keys read (one read a zone and a call, not one a
-- request, for zones without overrides or bans); reading: some zone
-- reads.  mark[d]: its marker key, where the call names markers.
local reads, reading, marker, mark = {}, false, #keys + 1, {}
for d = 1, marked and zones or 0 do
  marker = marker - (side[d] and 1 or 0)
end
for d = 1, zones do
  if side[d] then
    mark[d] = marked and keys[marker]
    reads[d] = not marked or call('EXISTS', keys[marker]) == 1
    marker = marker + 1
    reading = reading or reads[d]
  end
end

-- The reply's tail: kOverrideReplies elements for each override an entry
-- was decided under and each ban it met or set (see window_script.hpp).
local told = {}

