-- wrk script: POSTs TEI-style /rerank bodies replayed from a file written by
-- `tide bench --dump-requests FILE` (the same realistic workload and seed as tide bench), to
-- cross-check tide bench's figures with a third-party client.
--
-- usage: TIDE_BENCH_REQUESTS=requests.jsonl wrk -t1 -c50 -d60s --timeout 600s \
--            -s bench/wrk/rerank.lua http://127.0.0.1:8000/rerank
-- Each connection sends its next body when the previous answer arrived (closed loop); bodies are
-- taken round-robin. At the end it prints one line "wrk-json {...}" with requests/s, latency
-- percentiles (ms) and error counts for scripts, after wrk's own summary.
local path = os.getenv("TIDE_BENCH_REQUESTS")
local bodies = {}
local next_body = 0

local function load()
  if path == nil then error("set TIDE_BENCH_REQUESTS to a file written by tide bench --dump-requests") end
  local f = io.open(path, "r")
  if f == nil then error("cannot read " .. path) end
  for line in f:lines() do
    if #line > 0 then bodies[#bodies + 1] = line end
  end
  f:close()
  if #bodies == 0 then error(path .. " holds no request bodies") end
end

function init(args)
  load()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  next_body = next_body % #bodies + 1
  return wrk.format(nil, nil, nil, bodies[next_body])
end

function done(summary, latency, requests)
  local seconds = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    'wrk-json {"requests": %d, "seconds": %.3f, "rps": %.4f, "p50_ms": %.2f, "p90_ms": %.2f, ' ..
    '"p95_ms": %.2f, "p99_ms": %.2f, "max_ms": %.2f, "mean_ms": %.2f, "socket_errors": %d, ' ..
    '"timeouts": %d, "non_2xx_3xx": %d}\n',
    summary.requests, seconds, summary.requests / seconds,
    latency:percentile(50) / 1e3, latency:percentile(90) / 1e3, latency:percentile(95) / 1e3,
    latency:percentile(99) / 1e3, latency.max / 1e3, latency.mean / 1e3,
    e.connect + e.read + e.write, e.timeout, e.status))
end
