-- Acquire with a fencing token: lock.lua, and on success raise this node's
-- fence registers of the keys to one more than the highest of them.
-- KEYS[1..n] the lock keys, KEYS[n+1..2n] their fence registers (package
-- redlock's FenceKey). ARGV[1] owner value, ARGV[2] TTL in milliseconds.
-- Returns 0 if any key is held by someone else (nothing is written), else
-- the new register value (>= 1): this node's candidate token. The caller
-- takes the highest candidate of a quorum as the token and raises the
-- quorum's registers to it (fence_raise.lua) before handing it out.
local n = #KEYS / 2
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v and v ~= ARGV[1] then
    return 0
  end
end
local top = 0
for i = n + 1, 2 * n do
  local f = tonumber(redis.call('GET', KEYS[i]) or '0') or 0
  if f > top then
    top = f
  end
end
top = top + 1
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
for i = n + 1, 2 * n do
  redis.call('SET', KEYS[i], string.format('%d', top))
end
return top
