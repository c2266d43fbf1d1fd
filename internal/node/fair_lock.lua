-- Fair lock: acquire KEYS[1] (a plain lock: the owner value ARGV[1], TTL
-- ARGV[2] ms) only for the head of the queue. KEYS[2] the queue (sorted set
-- of waiter ids by ticket; equal tickets by id), KEYS[3] each place's
-- expiry (sorted set, unix ms on this node's clock), KEYS[4] the ticket
-- register. ARGV[3] how long a place holds without being renewed, in ms.
-- ARGV[4], ARGV[5] the trying waiter's id and ticket, then more id and
-- ticket pairs: this Client's waiters queued behind it, whose places it
-- keeps. With no pairs (a single attempt, TryLock) it is granted only if
-- nobody waits. Places that ran out are dropped first; the register is
-- raised to the highest ticket given, so that a ticket taken after this
-- call returned comes after them.
-- Returns 1 if granted (the waiter leaves the queue), else 0.
local k, q, e, r = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local place = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gone = redis.call('ZRANGEBYSCORE', e, '-inf', now)
for _, id in ipairs(gone) do
  redis.call('ZREM', q, id)
  redis.call('ZREM', e, id)
end
local top = tonumber(redis.call('GET', r) or '0') or 0
for i = 4, #ARGV, 2 do
  local ticket = tonumber(ARGV[i + 1])
  redis.call('ZADD', q, 'NX', ticket, ARGV[i])
  redis.call('ZADD', e, now + place, ARGV[i])
  if ticket > top then
    top = ticket
    redis.call('SET', r, ARGV[i + 1])
  end
end
if #ARGV >= 4 then
  redis.call('PEXPIRE', q, 2 * place)
  redis.call('PEXPIRE', e, 2 * place)
  if redis.call('PTTL', r) < 10 * place then
    redis.call('PEXPIRE', r, 10 * place)
  end
end
local v = redis.call('GET', k)
if v == ARGV[1] then -- this attempt, sent again
  redis.call('PEXPIRE', k, ARGV[2])
  return 1
end
if v then
  return 0
end
local head = redis.call('ZRANGE', q, 0, 0)[1]
if (#ARGV < 4 and head == nil) or (#ARGV >= 4 and head == ARGV[4]) then
  redis.call('SET', k, ARGV[1], 'PX', ARGV[2])
  if head then
    redis.call('ZREM', q, head)
    redis.call('ZREM', e, head)
  end
  return 1
end
return 0
