-- Acquire with a fencing token: lock.lua, and on success raise this node's
-- fence registers of the keys to this node's candidate token: one more
-- than the highest of them, and at least the node's clock in microseconds
-- (TIME), so that a register that expired or was lost still yields a
-- token above the earlier ones (see redlock.WithFencing for the rule).
-- KEYS[1..n] the lock keys, KEYS[n+1..2n] their fence registers (package
-- redlock's FenceKey). ARGV[1] owner value, ARGV[2] TTL in milliseconds,
-- ARGV[3] the registers' TTL in milliseconds; a register's TTL is never
-- shortened.
-- Returns 0 if any key is held by someone else (nothing is written), else
-- the candidate (>= 1). The caller takes the highest candidate of a quorum
-- as the token and raises the quorum's registers to it (fence_raise.lua)
-- before handing it out.
local n = #KEYS / 2
for i = 1, n do
  local v = redis.pcall('GET', KEYS[i]) -- WRONGTYPE: held as a typed lock or data
  if type(v) == 'table' and v['err'] then
    if string.find(v['err'], 'WRONGTYPE', 1, true) then
      return 0
    end
    error(v)
  end
  if v and v ~= ARGV[1] then
    return 0
  end
end
local now = redis.call('TIME')
local top = tonumber(now[1]) * 1000000 + tonumber(now[2]) - 1
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
local keep = tonumber(ARGV[3])
local v = string.format('%d', top)
for i = n + 1, 2 * n do
  local p = redis.call('PTTL', KEYS[i])
  if p > keep then
    redis.call('SET', KEYS[i], v, 'PX', p)
  else
    redis.call('SET', KEYS[i], v, 'PX', keep)
  end
end
return top
