-- Raise the deployment's longest-TTL register, never lower it.
-- KEYS[1] the register, ARGV[1] a TTL in milliseconds.
-- No expiry: it is one key per node, and it must outlive every lock.
-- Returns 1.
local t = tonumber(ARGV[1])
local cur = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if cur < t then
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1
