-- Extend: reset the TTL of KEYS only if every one still holds our owner
-- value (a plain lock's value or a typed lock's entry: see typed.lua).
-- ARGV[1] owner value, ARGV[2] TTL in milliseconds.
-- Never creates a key: an expired or stolen lock stays lost.
local shape = {}
for i = 1, #KEYS do
  local held, is_plain = holds(KEYS[i], ARGV[1])
  if not held then
    return 0
  end
  shape[i] = is_plain
end
for i = 1, #KEYS do
  renew(KEYS[i], ARGV[1], ARGV[2], shape[i])
end
return 1
