-- Lease pending overflows whose lease ran out (their taker died before queueing them) to a new taker.
-- KEYS: pending, due
-- ARGV: lease ms, limit
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local tokens = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, token in ipairs(tokens) do
  local payload = redis.call('HGET', KEYS[1], token)
  if payload then
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[1]), token)
    table.insert(out, token)
    table.insert(out, payload)
  else
    redis.call('ZREM', KEYS[2], token)
  end
end
return out
