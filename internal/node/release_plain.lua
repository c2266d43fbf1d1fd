-- Release's common case, before the typed locks' functions that follow
-- are defined: one plain lock that holds our owner value (ARGV[1]) is
-- deleted and announced as release.lua would; anything else goes on to it.
if #KEYS == 1 and redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then
    redis.pcall('PUBLISH', ARGV[2] .. (ARGV[3] or KEYS[1]), ARGV[1])
  end
  return 1
end
