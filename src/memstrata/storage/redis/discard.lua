-- Remove turns the store no longer holds from their sessions, and pending overflows left with none.
-- Only the seqs named go: a turn tracked since the caller looked (another process's new add) stays.
-- A session goes whole once it has tracked no turn that still exists (its seen set is empty): while
-- one does, seen keeps a replay of that turn's add a no-op, even after the turn left for mid-term.
-- KEYS: idle, pending, due, sessions (the user's), then per session: items, seen, meta
-- ARGV: session count, token count, then per session: sid, seq count, seqs; then the tokens
local sessions, tokens = tonumber(ARGV[1]), tonumber(ARGV[2])
local arg = 3
for session = 0, sessions - 1 do
  local items, seen, meta = KEYS[5 + session * 3], KEYS[6 + session * 3], KEYS[7 + session * 3]
  local sid, count = ARGV[arg], tonumber(ARGV[arg + 1])
  arg = arg + 2
  local affected = {}
  for turn = 1, count do
    local exchange = redis.call('ZSCORE', items, ARGV[arg])
    redis.call('ZREM', items, ARGV[arg])
    redis.call('SREM', seen, ARGV[arg])
    redis.call('HDEL', meta, 's' .. ARGV[arg])
    if exchange then affected[tonumber(exchange)] = true end
    arg = arg + 1
  end
  -- When each exchange that lost turns opened: the earliest of its turns left (once per exchange).
  for exchange in pairs(affected) do
    local opened = nil
    for _, member in ipairs(redis.call('ZRANGEBYSCORE', items, exchange, exchange)) do
      local said = redis.call('HGET', meta, 's' .. member)
      if said and (opened == nil or tonumber(said) < tonumber(opened)) then opened = said end
    end
    if opened then
      redis.call('HSET', meta, 't' .. exchange, opened)
    elseif redis.call('ZCOUNT', items, exchange, exchange) == 0 then
      redis.call('HDEL', meta, 't' .. exchange)
    end
  end
  if redis.call('SCARD', seen) == 0 then
    redis.call('DEL', items, seen, meta)
    redis.call('ZREM', KEYS[1], sid)
    redis.call('SREM', KEYS[4], sid)
  end
end
for token = 1, tokens do
  redis.call('HDEL', KEYS[2], ARGV[arg])
  redis.call('ZREM', KEYS[3], ARGV[arg])
  arg = arg + 1
end
return sessions
