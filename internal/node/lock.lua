-- Acquire: all-or-nothing over KEYS on this node.
-- ARGV[1] owner value, ARGV[2] TTL in milliseconds.
-- A key that already holds our owner value (a retry of the same acquisition)
-- has its TTL reset; any key held by someone else, also as a typed lock or
-- as other data (GET answers WRONGTYPE), fails the whole call and nothing
-- is written. Any other error (an ACL refusing GET) is raised.
for i = 1, #KEYS do
  local v = redis.pcall('GET', KEYS[i])
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
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return 1
