-- The guard, run after the command's own script is defined as body (see
-- guard.go). It checks what this Client's votes on the node depend on, in
-- the same script as the grant:
-- - ARGV[1], the run_id of the server process the votes are bound to: a
--   node that runs another process (it restarted, a proxy reconnected to
--   it, a replica was promoted) may have lost locks that are still held;
-- - ARGV[2], the node's evicted_keys when it was bound: a node that
--   evicted keys since may have lost locks (also one whose policy was
--   switched to evicting at run time: hence on every grant);
-- - the TTL register entry ARGV[3] (a TTL bucket) must outlive the lock by
--   ARGV[4] ms from now, or it is raised to ARGV[5] ms from now first: an
--   entry is only trusted where it is, not where it was once written.
-- - the stamp (a hash that never expires) names this process: "aof" its
--   run_id, "prev" the one it replaced.
-- A refusal writes nothing and names what it found. KEYS ends with the
-- register and its stamp; the command's own keys come before them, its
-- own arguments follow the guard's (ARGV from 6).
local info = redis.call('INFO', 'server')
if not string.find(info, 'run_id:' .. ARGV[1], 1, true) then
  return redis.error_reply('REDLOCKPROC ' .. (string.match(info, 'run_id:(%x+)') or 'unknown'))
end
local evicted = string.match(redis.call('INFO', 'stats'), 'evicted_keys:(%d+)')
if evicted ~= ARGV[2] then
  return redis.error_reply('REDLOCKEVICT ' .. (evicted or 'unknown'))
end
local nk = #KEYS
local reg, stamp = KEYS[nk - 1], KEYS[nk]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = tonumber(redis.call('HGET', reg, ARGV[3]) or '0') or 0
if cur < now + tonumber(ARGV[4]) then
  local last = now + tonumber(ARGV[5])
  redis.call('HSET', reg, ARGV[3], string.format('%.0f', last))
  local all = redis.call('HGETALL', reg)
  for i = 1, #all, 2 do
    local e = tonumber(all[i + 1]) or 0
    if e <= now then
      redis.call('HDEL', reg, all[i])
    elseif e > last then
      last = e
    end
  end
  redis.call('PEXPIREAT', reg, string.format('%.0f', last))
end
-- The stamp names the process before its first grant (ARGV[1] is this
-- process, found in INFO above): a later process that holds it loaded
-- this one's data.
local was = redis.call('HGET', stamp, 'aof')
if was ~= ARGV[1] then
  if was then
    redis.call('HSET', stamp, 'prev', was)
  else
    redis.call('HDEL', stamp, 'prev')
  end
  redis.call('HSET', stamp, 'aof', ARGV[1])
end
local keys = {}
for i = 1, nk - 2 do
  keys[i] = KEYS[i]
end
local argv = {}
for i = 6, #ARGV do
  argv[i - 5] = ARGV[i]
end
return body(keys, argv)
