-- wrk script: PUT every id 1..KEYS of /v0/entity once per pass, in order,
-- 64 requests pipelined per connection turn (run it with one thread).
local keys = tonumber(os.getenv("KEYS") or "10000")
local body = string.rep("v", tonumber(os.getenv("VALUE_SIZE") or "256"))
local next_id = 0

function request()
  local reqs = {}
  for _ = 1, 64 do
    next_id = next_id % keys + 1
    reqs[#reqs + 1] = wrk.format("PUT", "/v0/entity?id=" .. next_id, nil, body)
  end
  return table.concat(reqs)
end

function done(summary, latency, requests)
  io.write(string.format('{"requests": %d, "non_2xx": %d}\n', summary.requests, summary.errors.status))
end
