-- The "OpenResty way" peer for the benchmark: lua-nginx-module with
-- lua-resty-redis (Debian ships it as nginx.redis in lua-nginx-redis), a
-- keepalive connection pool, called from access_by_lua_block.
--
-- rlbench_cfg (written by bench/run.pl into the run's temp dir) holds the
-- Redis port, the limits, and the module's own sliding-window script text
-- (assembled from src/scripts/lua/) with its SHA-1, so Redis does the same
-- work as for the module and only the client side differs.
local ok, redis = pcall(require, "resty.redis")
if not ok then
    redis = require "nginx.redis"
end
local cfg = require "rlbench_cfg"

local floor = math.floor
local unpack = unpack
local find = string.find
local ngx = ngx
local var = ngx.var

local _M = {}

local function connect()
    local red = redis:new()
    red:set_timeout(cfg.timeout_ms)
    local ok, err = red:connect("127.0.0.1", cfg.port)
    if not ok then
        return nil, err
    end
    return red
end

-- After a call: a good reply puts the connection back in the pool, a
-- failed one closes it (its state is unknown).  Returns the reply or nil.
local function finish(red, res, err)
    if not res then
        ngx.log(ngx.WARN, "rlbench: redis: ", err)
        red:close()
        return nil
    end
    local ok, kerr = red:set_keepalive(cfg.idle_ms, cfg.pool_size)
    if not ok then
        ngx.log(ngx.WARN, "rlbench: set_keepalive: ", kerr)
    end
    return res
end

-- The request's subject and a pooled connection, or nothing when the
-- request has no subject or Redis cannot be reached (then it passes).
local function subject_and_connection()
    local subject = var.http_x_api_key
    if not subject or subject == "" then
        return nil
    end
    local red, err = connect()
    if not red then
        ngx.log(ngx.WARN, "rlbench: redis connect: ", err)
        return nil
    end
    return subject, red
end

-- Sliding window: EVALSHA of the module's script with the module's
-- arguments (cfg.args, built by run.pl from src/scripts/window_script.hpp's call
-- convention: a batch of this one request in one zone: 1, limit, bucket
-- ms, buckets, "s", "1", then "c\0"); on NOSCRIPT, SCRIPT LOAD it and retry
-- once.
function _M.sliding()
    local subject, red = subject_and_connection()
    if not red then
        return
    end
    local key = cfg.prefix .. subject
    local res, err = red:evalsha(cfg.sha, 1, key, unpack(cfg.args))
    if not res and err and find(err, "NOSCRIPT", 1, true) then
        local sha, lerr = red:script("load", cfg.script)
        if not sha then
            ngx.log(ngx.WARN, "rlbench: SCRIPT LOAD: ", lerr)
            red:close()
            return
        end
        res, err = red:evalsha(sha, 1, key, unpack(cfg.args))
    end
    res = finish(red, res, err)
    -- The reply: Redis time, then this request's rejected flag and counts.
    if res and res[2] == 1 then
        return ngx.exit(429)
    end
end

-- Fixed window: INCR + EXPIRE pipelined on a key per window.
function _M.fixed()
    local subject, red = subject_and_connection()
    if not red then
        return
    end
    local window = floor(ngx.now() / cfg.window_s)
    local key = cfg.prefix .. subject .. ":" .. window
    red:init_pipeline(2)
    red:incr(key)
    red:expire(key, cfg.window_s)
    local res = finish(red, red:commit_pipeline())
    if not res then
        return
    end
    local count = res[1]
    if type(count) ~= "number" then
        ngx.log(ngx.WARN, "rlbench: INCR: ", tostring(count and count[2]))
        return
    end
    if count > cfg.limit then
        return ngx.exit(429)
    end
end

return _M
