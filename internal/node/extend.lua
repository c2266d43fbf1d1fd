-- Extend: reset the TTL of KEYS only if every one still holds our owner
-- value (a plain lock's value or a typed lock's entry: see typed.lua).
-- ARGV[1] owner value, ARGV[2] TTL in milliseconds.
-- Never creates a key: an expired or stolen lock stays lost.
for i = 1, #KEYS do
  if not holds(KEYS[i], ARGV[1]) then
    return 0
  end
end
for i = 1, #KEYS do
  renew(KEYS[i], ARGV[1], ARGV[2])
end
return 1
