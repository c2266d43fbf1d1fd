-- Raise the fence registers of a held lock to a token, never lower them.
-- KEYS[1..n] the lock keys, KEYS[n+1..2n] their fence registers.
-- ARGV[1] owner value, ARGV[2] the token, ARGV[3] the registers' TTL in
-- milliseconds: each register's TTL is raised to it, never shortened.
-- Only while every lock key still holds the owner value: a write that
-- arrives after the lock expired here could land after a later holder read
-- the register, so it must not count.
-- Returns 1 if the registers now hold at least the token, else 0.
local n = #KEYS / 2
for i = 1, n do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
end
local t = tonumber(ARGV[2])
local keep = tonumber(ARGV[3])
for i = n + 1, 2 * n do
  local v = redis.call('GET', KEYS[i])
  if (tonumber(v or '0') or 0) < t then
    v = ARGV[2]
  end
  local p = redis.call('PTTL', KEYS[i])
  if p < keep then
    p = keep
  end
  redis.call('SET', KEYS[i], v, 'PX', p)
end
return 1
