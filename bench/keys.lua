-- wrk script: spreads requests over BENCH_SUBJECTS distinct subjects (default
-- 10000) through the X-Api-Key header, keep-alive (wrk's default).  The
-- requests are formatted once in init(), so request() costs wrk almost
-- nothing.  done() prints one machine-readable line for bench/run.pl.
local subjects = tonumber(os.getenv("BENCH_SUBJECTS") or "10000")
local path = os.getenv("BENCH_PATH") or "/index.html"
local prefix = os.getenv("BENCH_KEY_PREFIX") or "k"

local threads = {}
local counter = 0

function setup(thread)
    counter = counter + 1
    thread:set("tid", counter)
    table.insert(threads, thread)
end

local reqs = {}
local n = 0
local i = 0

function init(args)
    local host = wrk.headers["Host"] or (wrk.host .. ":" .. wrk.port)
    for k = 1, subjects do
        reqs[k] = wrk.format("GET", path,
                             { ["Host"] = host, ["X-Api-Key"] = prefix .. k })
    end
    n = subjects
    -- threads start at different subjects
    i = ((tonumber(tid) or 1) - 1) * math.floor(n / 2) % n
end

function request()
    i = i + 1
    if i > n then i = 1 end
    return reqs[i]
end

-- done(), which prints the line run.pl reads, is shared by both wrk scripts.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "report.lua")
