-- Clear, on KEYS[1], the writer's intent that the refused attempt ARGV[1]
-- set last (rw_lock.lua's '#iw'): that writer got in on a quorum of other
-- nodes and has left, so its wait is over here too; readers must not wait
-- out its intent. Writers still waiting set it again with their next
-- attempt. Returns 1 if it cleared the intent, else 0.
local k, owner = KEYS[1], ARGV[1]
if plain(k) or redis.call('HGET', k, '#iw') ~= owner then
  return 0
end
redis.call('HDEL', k, '#intent', '#iw')
settle(k, now_ms())
return 1
