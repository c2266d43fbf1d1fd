-- ExtendMany: the Extend script for many locks in one call (watchdog
-- renewals of one Client, batched). KEYS are the locks' keys one lock after
-- another; ARGV holds, per lock, how many keys it has, its owner value and
-- its TTL in milliseconds. A lock's TTLs are reset only if every one of its
-- keys still holds its owner value (see typed.lua); a key is never
-- created. Returns one 1 or 0 per lock, in order.
local out = {}
local k = 1
for a = 1, #ARGV, 3 do
  local n, owner, ttl = tonumber(ARGV[a]), ARGV[a + 1], ARGV[a + 2]
  local ok, shape = 1, {}
  for i = k, k + n - 1 do
    local held, is_plain = holds(KEYS[i], owner)
    if not held then
      ok = 0
      break
    end
    shape[i] = is_plain
  end
  if ok == 1 then
    for i = k, k + n - 1 do
      renew(KEYS[i], owner, ttl, shape[i])
    end
  end
  out[#out + 1] = ok
  k = k + n
end
return out
