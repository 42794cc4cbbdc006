-- wrk script: the v0 entity API, one request at a time per connection
-- (keep-alive, no pipelining), a PUT/GET mix over random ids.
--   PUT_PERCENT  share of PUTs (default 50)
--   KEYS         ids 1..KEYS (default 10000)
--   REPLICAS     the replicas=ACK/FROM parameter (default 2/3)
--   VALUE_SIZE   PUT body bytes (default 256)
-- At the end it prints one JSON line: requests/s, latency percentiles (ms),
-- and the responses that were not 2xx.
local mix = tonumber(os.getenv("PUT_PERCENT") or "50")
local keys = tonumber(os.getenv("KEYS") or "10000")
local replicas = os.getenv("REPLICAS") or "2/3"
local body = string.rep("v", tonumber(os.getenv("VALUE_SIZE") or "256"))

local threads = {}

function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  math.randomseed(os.time() * 1000 + id)
end

function request()
  local path = "/v0/entity?id=" .. math.random(1, keys) .. "&replicas=" .. replicas
  if math.random(100) <= mix then
    return wrk.format("PUT", path, nil, body)
  end
  return wrk.format("GET", path)
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "seconds": %.3f, "rps": %.1f, "p50_ms": %.3f, "p90_ms": %.3f, "p99_ms": %.3f, "p999_ms": %.3f, "max_ms": %.3f, "non_2xx": %d, "socket_errors": %d}\n',
    summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    latency:percentile(99.9) / 1000, latency.max / 1000,
    e.status, e.connect + e.read + e.write + e.timeout))
end
