-- Fenced write: KEYS[1] the resource key, KEYS[2] where the highest token
-- seen for it and the holder that wrote with it are kept, as
-- "<token> <holder>" (a bare "<token>" counts as written by no holder).
-- ARGV[1] the writer's token, ARGV[2] the writer's holder (non-empty),
-- ARGV[3] 'set' or 'hset', then the value (set) or field/value pairs
-- (hset).
-- A higher token is accepted; an equal one only from the same holder
-- writing again (two holders can meet on one token only if the lock's
-- clock assumptions broke); anything else is refused and nothing is
-- written. Returns 1 if written, else 0.
local t = tonumber(ARGV[1])
local cur = redis.call('GET', KEYS[2])
local last, who = 0, ''
if cur then
  local sp = string.find(cur, ' ', 1, true)
  if sp then
    last, who = tonumber(string.sub(cur, 1, sp - 1)) or 0, string.sub(cur, sp + 1)
  else
    last = tonumber(cur) or 0
  end
end
if t < last or (t == last and who ~= ARGV[2]) then
  return 0
end
if t > last then
  redis.call('SET', KEYS[2], ARGV[1] .. ' ' .. ARGV[2])
end
if ARGV[3] == 'set' then
  redis.call('SET', KEYS[1], ARGV[4])
else
  redis.call('HSET', KEYS[1], unpack(ARGV, 4))
end
return 1
