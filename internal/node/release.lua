-- Release: delete each of KEYS that still holds our owner value (ARGV[1]);
-- keys now held by someone else are left untouched. With a channel prefix
-- in ARGV[2], each deleted key is announced on ARGV[2] .. key (see package
-- handoff) with the owner value as payload, so that waiters wake at once
-- instead of polling; redis.pcall: a user without the channel permission
-- still releases. Returns how many were deleted.
local n = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    if ARGV[2] ~= '' then
      redis.pcall('PUBLISH', ARGV[2] .. KEYS[i], ARGV[1])
    end
    n = n + 1
  end
end
return n
