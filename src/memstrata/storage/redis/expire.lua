-- Move a whole idle session out of working memory, as one pending overflow: expiry never drops an exchange.
-- Re-checks the idle time, so a session that got new turns since the caller looked stays.
-- KEYS: idle, pending, due, counter, items, seen, meta, sessions
-- ARGV: sid, idle ms, lease ms, user id, session key
local last = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not last then
  return {}
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
if tonumber(last) > now - tonumber(ARGV[2]) then
  return {}
end
local seqs = redis.call('ZRANGE', KEYS[5], 0, -1)
redis.call('DEL', KEYS[5], KEYS[6], KEYS[7])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('SREM', KEYS[8], ARGV[1])
if #seqs == 0 then
  return {}
end
local token = tostring(redis.call('INCR', KEYS[4]))
local payload = cjson.encode({user = ARGV[4], session = ARGV[5], seqs = seqs})
redis.call('HSET', KEYS[2], token, payload)
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), token)
return {token, payload}
