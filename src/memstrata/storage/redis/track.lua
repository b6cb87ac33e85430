-- Track one batch of new turns and move each session's oldest exchanges out past the capacity.
-- Runs atomically, so two processes never both move, nor both skip, the same exchange.
-- KEYS: idle (zset sid -> last activity ms), pending (hash token -> payload), due (zset token -> lease end ms),
--       counter, batches (set of batch names tracked), then per session: items (zset seq -> exchange),
--       seen (set of seqs ever tracked), meta (hash), sessions (set of the user's sids)
-- ARGV: capacity, lease ms, batch name ('' for none), session count,
--       then per session: user id, session key, sid, turn count, then per turn: seq, 1 if it starts an exchange
--       else 0, and when it was said (ms since the epoch)
-- The exchanges said first leave first (the meta hash's t<exchange> holds when each was opened: its first
-- turn's time; s<seq> each turn's, so a delete can recompute it); ties, and exchanges tracked by a version
-- that kept no times, leave in the order they were added. A reply joins the exchange in the set opened last
-- at or before its own time (the latest added among equals), or starts its own when none was.
local capacity = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local batch = ARGV[3]
if batch ~= '' and redis.call('SISMEMBER', KEYS[5], batch) == 1 then
  return {}
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local out = {}
local arg = 5
for session = 0, tonumber(ARGV[4]) - 1 do
  local items, seen, meta, sessions = KEYS[6 + session * 4], KEYS[7 + session * 4], KEYS[8 + session * 4],
    KEYS[9 + session * 4]
  local user, session_key, sid, count = ARGV[arg], ARGV[arg + 1], ARGV[arg + 2], tonumber(ARGV[arg + 3])
  arg = arg + 4
  local latest = redis.call('HGET', meta, 'exchange')  -- false when the session is new
  if latest then latest = tonumber(latest) else latest = nil end
  local added = 0
  -- The session's exchanges by opening time, read once per call: a reply is placed by binary search
  -- (placing a turn never moves an opening: a reply joins only an exchange opened at or before it).
  local order, last = {}, nil
  local entries = redis.call('ZRANGE', items, 0, -1, 'WITHSCORES')
  for i = 2, #entries, 2 do
    local number = tonumber(entries[i])
    if number ~= last then
      last = number
      table.insert(order, {tonumber(redis.call('HGET', meta, 't' .. number)) or -math.huge, number})
    end
  end
  table.sort(order, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  for turn = 1, count do
    local seq, starts, said = ARGV[arg], tonumber(ARGV[arg + 1]), ARGV[arg + 2]
    arg = arg + 3
    if redis.call('SADD', seen, seq) == 1 then
      local exchange = nil
      local at = tonumber(said)
      -- The first position whose opening is after this turn: everything before it opened at or before.
      local low, high = 1, #order + 1
      while low < high do
        local middle = math.floor((low + high) / 2)
        if order[middle][1] <= at then low = middle + 1 else high = middle end
      end
      if starts == 0 and low > 1 then
        exchange = order[low - 1][2]  -- opened last at or before it; the latest added among equals
      else
        if latest == nil then latest = 0 else latest = latest + 1 end
        exchange = latest
        table.insert(order, low, {at, exchange})
        redis.call('HSET', meta, 't' .. exchange, said)
      end
      -- A joined exchange keeps its opening: it opened at or before this turn (one tracked by an
      -- older version, with no time, stays the oldest until it leaves).
      redis.call('ZADD', items, exchange, seq)
      redis.call('HSET', meta, 's' .. seq, said)
      added = added + 1
    end
  end
  if added > 0 then
    redis.call('HSET', meta, 'exchange', latest, 'user', user, 'session', session_key)
    redis.call('ZADD', KEYS[1], now, sid)
    redis.call('SADD', sessions, sid)
    local entries = redis.call('ZRANGE', items, 0, -1, 'WITHSCORES')
    local exchanges, last = {}, nil
    for i = 2, #entries, 2 do
      local exchange = tonumber(entries[i])
      if exchange ~= last then
        table.insert(exchanges, exchange)
        last = exchange
      end
    end
    local excess = #exchanges - capacity
    if excess > 0 then
      local order = {}
      for _, exchange in ipairs(exchanges) do
        local said = tonumber(redis.call('HGET', meta, 't' .. exchange)) or -math.huge
        table.insert(order, {said, exchange})
      end
      table.sort(order, function(a, b)
        if a[1] ~= b[1] then return a[1] < b[1] end
        return a[2] < b[2]
      end)
      local seqs = {}
      for i = 1, excess do
        local exchange = order[i][2]
        for _, seq in ipairs(redis.call('ZRANGEBYSCORE', items, exchange, exchange)) do
          table.insert(seqs, seq)
          redis.call('HDEL', meta, 's' .. seq)
        end
        redis.call('ZREMRANGEBYSCORE', items, exchange, exchange)
        redis.call('HDEL', meta, 't' .. exchange)
      end
      table.sort(seqs, function(a, b) return tonumber(a) < tonumber(b) end)
      local token = tostring(redis.call('INCR', KEYS[4]))
      local payload = cjson.encode({user = user, session = session_key, seqs = seqs})
      redis.call('HSET', KEYS[2], token, payload)
      redis.call('ZADD', KEYS[3], now + lease, token)
      table.insert(out, token)
      table.insert(out, payload)
    end
  end
end
if batch ~= '' then
  redis.call('SADD', KEYS[5], batch)
end
return out
