-- Release: delete our hold of each of KEYS that still holds our owner
-- value (ARGV[1]; a typed lock's entry: see typed.lua); keys now held by
-- someone else are left untouched. With a channel prefix in ARGV[2], each
-- key that is gone is announced on ARGV[2] .. key, or on ARGV[2] .. ARGV[3]
-- if given (the semaphore of a permit), with the owner value as payload
-- (see package handoff), so that waiters wake at once instead of polling;
-- redis.pcall: a user without the channel permission still releases.
-- Returns how many holds were deleted.
local n = 0
for i = 1, #KEYS do
  local held, is_plain = holds(KEYS[i], ARGV[1])
  if held then
    if drop(KEYS[i], ARGV[1], is_plain) and ARGV[2] ~= '' then
      redis.pcall('PUBLISH', ARGV[2] .. (ARGV[3] or KEYS[i]), ARGV[1])
    end
    n = n + 1
  end
end
return n
