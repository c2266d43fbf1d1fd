-- Release: delete each of KEYS that still holds our owner value (ARGV[1]);
-- keys now held by someone else are left untouched. Returns how many were
-- deleted.
local n = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    n = n + 1
  end
end
return n
