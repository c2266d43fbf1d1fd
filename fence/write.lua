-- Fenced write: KEYS[1] the resource key, KEYS[2] where the highest token
-- seen for it is kept. ARGV[1] the writer's token, ARGV[2] 'set' or
-- 'hset', then the value (set) or field/value pairs (hset).
-- A token lower than the highest seen is refused and nothing is written;
-- an equal one is the same holder writing again and is accepted.
-- Returns 1 if written, else 0.
local t = tonumber(ARGV[1])
local last = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if t < last then
  return 0
end
if t > last then
  redis.call('SET', KEYS[2], ARGV[1])
end
if ARGV[2] == 'set' then
  redis.call('SET', KEYS[1], ARGV[3])
else
  redis.call('HSET', KEYS[1], unpack(ARGV, 3))
end
return 1
