-- Acquire a typed lock (see typed.lua) on KEYS[1] for the owner value
-- ARGV[1] with a TTL of ARGV[2] ms. ARGV[3] the mode: 'reentrant', 'read'
-- or 'write'. ARGV[4] (reentrant) the hold to enter: ARGV[1] itself for a
-- new hold, else the hold's name, whose key must exist (a re-entry never
-- re-creates a lost lock). ARGV[5] (write) how long a refused writer keeps
-- new readers out, in ms.
-- Returns 1 if granted, 0 if not (only a refused writer's intent is
-- written), and an error reply starting REDLOCKTYPE if the key is a lock
-- of another type or not a lock.
local k, owner, ttl, mode = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3]
local kind = 'rw'
if mode == 'reentrant' then kind = 'reentrant' end
local t = redis.call('TYPE', k)['ok']
local now = now_ms()
if t == 'hash' then
  local have = redis.call('HGET', k, '#kind')
  if have ~= kind then
    return redis.error_reply('REDLOCKTYPE ' .. k .. ' is not a ' .. kind .. ' lock')
  end
  if redis.call('HEXISTS', k, owner) == 1 then -- this attempt, sent again
    renew(k, owner, ttl, false)
    return 1
  end
  if settle(k, now) == 0 then
    t = 'none'
  end
elseif t ~= 'none' then
  return redis.error_reply('REDLOCKTYPE ' .. k .. ' is not a ' .. kind .. ' lock')
end
if t == 'none' then
  if mode == 'reentrant' and ARGV[4] ~= owner then
    return 0
  end
  redis.call('HSET', k, '#kind', kind, owner, now + ttl)
  if mode == 'reentrant' then
    redis.call('HSET', k, '#holder', owner)
  else
    redis.call('HSET', k, '#mode', string.sub(mode, 1, 1))
  end
  redis.call('PEXPIRE', k, ttl)
  return 1
end
local ok
if mode == 'reentrant' then
  ok = redis.call('HGET', k, '#holder') == ARGV[4]
elseif mode == 'read' then
  ok = redis.call('HGET', k, '#mode') == 'r' and (tonumber(redis.call('HGET', k, '#intent') or '0') or 0) <= now
else
  ok = false
  local w = tonumber(redis.call('HGET', k, '#intent') or '0') or 0
  if w < now + tonumber(ARGV[5]) then
    redis.call('HSET', k, '#intent', now + tonumber(ARGV[5]))
  end
end
if ok then
  redis.call('HSET', k, owner, now + ttl)
end
settle(k, now)
return ok and 1 or 0
