-- Acquire a read-write lock (see typed.lua) on KEYS[1] for the owner value
-- ARGV[1] with a TTL of ARGV[2] ms. ARGV[3] the mode: 'read' or 'write'.
-- ARGV[4] (write) how long a refused writer keeps new readers out, in ms:
-- its intent outlives the readers it waits for (the key is kept while it
-- is live), and a granted writer clears it (writers still waiting set it
-- again with their next attempt). '#iw' is the owner value of the attempt
-- that set it last, so that the writer's release clears it on the nodes
-- that refused it (rw_clear.lua).
-- Returns 1 if granted, 0 if not (only a refused writer's intent is
-- written), and an error reply starting REDLOCKTYPE if the key is a lock
-- of another type or not a lock.
local k, owner, ttl, mode = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3]
local now = now_ms()
local n, done = typed_hash(k, 'rw', owner, ttl, now)
if n == nil then
  return done
end
local intent = tonumber(redis.call('HGET', k, '#intent') or '0') or 0
if mode == 'read' then
  if intent > now or (n > 0 and redis.call('HGET', k, '#mode') ~= 'r') then
    return 0
  end
  redis.call('HSET', k, '#kind', 'rw', '#mode', 'r', owner, now + ttl)
elseif n > 0 then
  local want = now + tonumber(ARGV[4])
  if intent < want then
    redis.call('HSET', k, '#intent', want, '#iw', owner)
    settle(k, now)
  end
  return 0
else
  redis.call('HSET', k, '#kind', 'rw', '#mode', 'w', owner, now + ttl)
  redis.call('HDEL', k, '#intent', '#iw')
end
settle(k, now)
return 1
