-- Acquire: all-or-nothing over KEYS on this node.
-- ARGV[1] owner value, ARGV[2] TTL in milliseconds.
-- A key that already holds our owner value (a retry of the same acquisition)
-- has its TTL reset; any key held by someone else fails the whole call and
-- nothing is written.
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v and v ~= ARGV[1] then
    return 0
  end
end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return 1
