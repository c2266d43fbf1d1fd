-- Extend's common case, before the typed locks' functions that follow are
-- defined: one plain lock that holds our owner value (ARGV[1]) gets the
-- TTL ARGV[2] as extend.lua would give it; anything else goes on to it.
if #KEYS == 1 and redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
