-- Raise the fence registers of a held lock to a token, never lower them.
-- KEYS[1..n] the lock keys, KEYS[n+1..2n] their fence registers.
-- ARGV[1] owner value, ARGV[2] the token. Only while every lock key still
-- holds the owner value: a write that arrives after the lock expired here
-- could land after a later holder read the register, so it must not count.
-- Returns 1 if the registers now hold at least the token, else 0.
local n = #KEYS / 2
for i = 1, n do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
end
local t = tonumber(ARGV[2])
for i = n + 1, 2 * n do
  local f = tonumber(redis.call('GET', KEYS[i]) or '0') or 0
  if f < t then
    redis.call('SET', KEYS[i], ARGV[2])
  end
end
return 1
