-- wrk script: every request carries a new subject (X-Api-Key built from a
-- run tag, the thread number and a counter), to show that the worker keeps
-- no per-subject state.  Each thread stops after BENCH_QUOTA requests
-- (wrk's -d is the time cap) and leaves the marker file BENCH_DONE.<thread>
-- so that bench/run.pl can end wrk's wait early.  done() prints one line for
-- bench/run.pl.
local quota = tonumber(os.getenv("BENCH_QUOTA") or "500000")
local path = os.getenv("BENCH_PATH") or "/index.html"
local tag = os.getenv("BENCH_KEY_PREFIX") or "u"
local marker = os.getenv("BENCH_DONE")

local counter = 0

function setup(thread)
    counter = counter + 1
    thread:set("tid", counter)
end

local head, tail
local sent = 0

function init(args)
    local host = wrk.headers["Host"] or (wrk.host .. ":" .. wrk.port)
    head = "GET " .. path .. " HTTP/1.1\r\nHost: " .. host
           .. "\r\nX-Api-Key: " .. tag .. (tid or 1) .. "-"
    tail = "\r\n\r\n"
end

function request()
    sent = sent + 1
    if sent == quota + 1 then
        if marker then
            local f = io.open(marker .. "." .. (tid or 1), "w")
            if f then f:write(quota, "\n") f:close() end
        end
        wrk.thread:stop()
    end
    return head .. sent .. tail
end

-- done(), which prints the line run.pl reads, is shared by both wrk scripts.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "report.lua")
