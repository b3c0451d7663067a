-- The summary line bench/run.pl reads from a wrk run (loaded by the wrk
-- scripts with dofile): request count, errors, latency percentiles in us.
function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "BENCHRESULT requests=%d duration_us=%d status=%d connect=%d read=%d write=%d timeout=%d p50=%d p90=%d p99=%d mean=%.1f max=%d\n",
        summary.requests, summary.duration, e.status, e.connect, e.read,
        e.write, e.timeout, latency:percentile(50), latency:percentile(90),
        latency:percentile(99), latency.mean, latency.max))
end
