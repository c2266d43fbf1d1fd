-- Fair lock: take a ticket. KEYS[1] the lock's ticket register. ARGV[1]
-- how long the register must stay, in ms (it outlives every queued place,
-- so a ticket never goes back below a waiting one). Returns the register
-- plus one, stored.
local t = redis.call('INCR', KEYS[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return t
