-- Acquire a reentrant lock (see typed.lua) on KEYS[1] for the owner value
-- ARGV[1] with a TTL of ARGV[2] ms. ARGV[3] the hold to enter: ARGV[1]
-- itself for a new hold, else the hold's name, whose key must have a live
-- entry (a re-entry never re-creates a lost lock).
-- Returns 1 if granted, 0 if not, and an error reply starting REDLOCKTYPE
-- if the key is a lock of another type or not a lock.
local k, owner, ttl, hold = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3]
local now = now_ms()
local n, done = typed_hash(k, 'reentrant', owner, ttl, now)
if n == nil then
  return done
end
if n == 0 then
  if hold ~= owner then
    return 0
  end
  redis.call('HSET', k, '#kind', 'reentrant', '#holder', owner, owner, now + ttl)
  redis.call('PEXPIRE', k, ttl)
  return 1
end
if redis.call('HGET', k, '#holder') ~= hold then
  return 0
end
redis.call('HSET', k, owner, now + ttl)
settle(k, now)
return 1
